# Generated kernels: every op/convention/border/layout against the naive reference (JIT, same
# algorithm and schedule as the AOT path), and the ONNX node tests compiled AOT into a bundle and
# run through the C runtime. Each binary compiles many pipelines, so it runs as whole processes
# (sharded for ctest -j) rather than one process per test case.
add_library(padfold_kernel_testing STATIC kernel_cases.cpp kernel_runner.cpp)
target_include_directories(padfold_kernel_testing PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(padfold_kernel_testing PUBLIC padfold_reference padfold_bundle)

add_executable(kernels_test kernels_test.cpp)
target_link_libraries(kernels_test PRIVATE padfold_kernel_testing GTest::gtest_main)
set(_pf_shards 3)
math(EXPR _pf_last "${_pf_shards} - 1")
foreach(_i RANGE ${_pf_last})
  add_test(NAME kernels_vs_reference_shard${_i} COMMAND kernels_test)
  set_tests_properties(kernels_vs_reference_shard${_i} PROPERTIES LABELS kernels
    ENVIRONMENT "GTEST_TOTAL_SHARDS=${_pf_shards};GTEST_SHARD_INDEX=${_i}")
endforeach()

# Every family's whole matrix compiled without running (one ctest entry per family).
add_executable(kernels_compile_test kernels_compile_test.cpp)
target_link_libraries(kernels_compile_test PRIVATE padfold_kernel_testing GTest::gtest_main)
gtest_discover_tests(kernels_compile_test PROPERTIES LABELS kernels TIMEOUT 1500)

add_executable(onnx_kernels_test onnx_kernels_test.cpp onnx_spec.cpp)
target_link_libraries(onnx_kernels_test PRIVATE padfold_bundle padfold_runtime padfold_reference
                                                padfold_onnx_testdata GTest::gtest_main)
add_test(NAME onnx_node_kernels COMMAND onnx_kernels_test)
set_tests_properties(onnx_node_kernels PROPERTIES LABELS kernels)

# The benchmark layers' spec (for interior_test), written from the shared layer set.
set(_pf_bench_spec "${CMAKE_CURRENT_BINARY_DIR}/bench_spec.json")
add_custom_command(
  OUTPUT "${_pf_bench_spec}"
  COMMAND /usr/bin/python3 "${PROJECT_SOURCE_DIR}/bench/make_bench_spec.py"
          "${PROJECT_SOURCE_DIR}/../shared/bench/layers.json" "${_pf_bench_spec}"
  DEPENDS "${PROJECT_SOURCE_DIR}/bench/make_bench_spec.py"
          "${PROJECT_SOURCE_DIR}/../shared/bench/layers.json")
add_custom_target(padfold_test_bench_spec DEPENDS "${_pf_bench_spec}")

add_executable(interior_test interior_test.cpp)
target_link_libraries(interior_test PRIVATE padfold_bundle GTest::gtest_main)
target_compile_definitions(interior_test PRIVATE PADFOLD_BENCH_SPEC="${_pf_bench_spec}")
add_dependencies(interior_test padfold_test_bench_spec)
gtest_discover_tests(interior_test PROPERTIES LABELS kernels)
