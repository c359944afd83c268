# Embedded and real-bundle tests. include()d from tests/CMakeLists.txt (after kernel_tests.cmake:
# needs padfold_kernel_testing). Bundles are compiled when the tests run, into the build directory,
# never at configure time. Labels: "embedded" (cross builds under qemu), "bundle" (host bundles).
#
#   bundle_compile_tiny, bundle_compile_tiny_avx512   fixture pf_host_bundles: padfold compile
#                                      examples/tiny.json for "host,x86-64-linux-avx2-fma" and for
#                                      "x86-64-linux-avx512_skylake" alone
#   bundle_runtime_test (GoogleTest)   pf_bundle_open on those bundles: reference, threads, targets
#   bundle_cli_test (GoogleTest)       `padfold run` on .npy files, and its errors
#   bundle_consumer                    configures, builds and runs tests/bundle_consumer against
#                                      the host bundle through its padfold_tiny.cmake
#   embedded_cross_test (GoogleTest)   examples/embedded for arm-64-linux, arm-32-linux,
#                                      riscv-64-linux, cross-built and run under qemu-user
if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
  message(STATUS "padfold embedded/bundle tests: Linux only, skipped")
  return()
endif()
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
find_package(Threads REQUIRED)
include(GoogleTest)

set(_pf_repo ${CMAKE_CURRENT_LIST_DIR}/..)
set(_pf_work ${CMAKE_CURRENT_BINARY_DIR}/bundle_work)
set(_pf_tiny_bundle ${_pf_work}/tiny)
set(_pf_avx512_bundle ${_pf_work}/tiny_avx512)

# Fixture: the host bundles, compiled at test time.
add_test(NAME bundle_compile_tiny
         COMMAND padfold compile ${_pf_repo}/examples/tiny.json -o ${_pf_tiny_bundle}
                 --target host,x86-64-linux-avx2-fma)
add_test(NAME bundle_compile_tiny_avx512
         COMMAND padfold compile ${_pf_repo}/examples/tiny.json -o ${_pf_avx512_bundle}
                 --target x86-64-linux-avx512_skylake)
set_tests_properties(bundle_compile_tiny bundle_compile_tiny_avx512 PROPERTIES
  FIXTURES_SETUP pf_host_bundles LABELS bundle TIMEOUT 300)

set(_pf_bundle_defs
  PADFOLD_BIN="$<TARGET_FILE:padfold>"
  PF_TINY_SPEC="${_pf_repo}/examples/tiny.json"
  PF_TINY_BUNDLE="${_pf_tiny_bundle}"
  PF_AVX512_BUNDLE="${_pf_avx512_bundle}")

add_executable(bundle_runtime_test ${CMAKE_CURRENT_LIST_DIR}/bundle_runtime_test.cpp)
target_link_libraries(bundle_runtime_test PRIVATE padfold_runtime padfold_kernel_testing
                      GTest::gtest_main Threads::Threads)
target_compile_definitions(bundle_runtime_test PRIVATE ${_pf_bundle_defs})
gtest_discover_tests(bundle_runtime_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS bundle FIXTURES_REQUIRED pf_host_bundles TIMEOUT 120)

add_executable(bundle_cli_test ${CMAKE_CURRENT_LIST_DIR}/bundle_cli_test.cpp)
target_link_libraries(bundle_cli_test PRIVATE padfold_kernel_testing GTest::gtest_main)
target_compile_definitions(bundle_cli_test PRIVATE ${_pf_bundle_defs}
                           PF_WORK_DIR="${_pf_work}/cli")
add_dependencies(bundle_cli_test padfold)
gtest_discover_tests(bundle_cli_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS bundle FIXTURES_REQUIRED pf_host_bundles TIMEOUT 120)

# The generated consumer CMake file, used by a C++-only project on this machine.
add_test(NAME bundle_consumer
         COMMAND ${CMAKE_CTEST_COMMAND}
                 --build-and-test ${CMAKE_CURRENT_LIST_DIR}/bundle_consumer ${_pf_work}/consumer
                 --build-generator ${CMAKE_GENERATOR}
                 --build-makeprogram ${CMAKE_MAKE_PROGRAM}
                 --build-project padfold_bundle_consumer
                 --build-options -DPADFOLD_BUNDLE=${_pf_tiny_bundle}
                                 -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
                                 -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}
                                 -DCMAKE_BUILD_TYPE=Release
                 --test-command consumer)
set_tests_properties(bundle_consumer PROPERTIES
  LABELS bundle FIXTURES_REQUIRED pf_host_bundles TIMEOUT 300
  PASS_REGULAR_EXPRESSION "consumer ok: 4 kernels on target ")

# Cross builds of examples/embedded under qemu-user.
add_executable(embedded_cross_test ${CMAKE_CURRENT_LIST_DIR}/embedded_cross_test.cpp)
target_link_libraries(embedded_cross_test PRIVATE padfold_kernel_testing GTest::gtest_main)
target_include_directories(embedded_cross_test PRIVATE ${_pf_repo}/examples/embedded)
target_compile_definitions(embedded_cross_test PRIVATE
  PADFOLD_BIN="$<TARGET_FILE:padfold>"
  PF_EXAMPLE_DIR="${_pf_repo}/examples/embedded"
  PF_WORK_DIR="${CMAKE_CURRENT_BINARY_DIR}/embedded_work"
  PF_CMAKE="${CMAKE_COMMAND}"
  PF_CMAKE_GENERATOR="${CMAKE_GENERATOR}"
  PF_CMAKE_MAKE_PROGRAM="${CMAKE_MAKE_PROGRAM}")
add_dependencies(embedded_cross_test padfold)
gtest_discover_tests(embedded_cross_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS embedded TIMEOUT 300)

# examples/embedded/model.json against the JSON Schema (spec_schema checks examples/*.json only).
add_test(NAME embedded_spec_schema
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/schema_test.py
                 ${_pf_repo}/generator/spec.schema.json ${_pf_repo}/examples/embedded)
set_tests_properties(embedded_spec_schema PROPERTIES LABELS embedded)

# Compile workers: injected crashes and hangs, fallbacks, atomic bundle replacement; host override.
add_executable(compile_worker_test ${CMAKE_CURRENT_LIST_DIR}/compile_worker_test.cpp)
target_link_libraries(compile_worker_test PRIVATE padfold_kernel_testing padfold_runtime
                                                  GTest::gtest_main)
target_compile_definitions(compile_worker_test PRIVATE ${_pf_bundle_defs})
add_dependencies(compile_worker_test padfold)
gtest_discover_tests(compile_worker_test PROPERTIES LABELS bundle TIMEOUT 300)
