# Padding-convention tests, the naive reference and the ONNX node-test checks.
# Included from tests/CMakeLists.txt; needs the padfold_core target (generator/padding.cpp).
#
#   padfold_reference      naive conv/pool reference (tests/reference), no Halide
#   padfold_onnx_testdata  readers for the ONNX backend node tests (libonnx-dev + protobuf)
#   padding_test, reference_test, onnx_shapes_test   GoogleTest executables

find_package(GTest REQUIRED)
find_package(Protobuf REQUIRED)
find_package(ONNX REQUIRED CONFIG)  # Debian libonnx-dev: imported targets onnx, onnx_proto
include(GoogleTest)

set(PADFOLD_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})
set(PADFOLD_GENERATOR_DIR ${CMAKE_CURRENT_LIST_DIR}/../generator)

add_library(padfold_reference STATIC ${PADFOLD_TESTS_DIR}/reference/reference.cpp)
target_include_directories(padfold_reference PUBLIC ${PADFOLD_TESTS_DIR})

add_library(padfold_onnx_testdata STATIC ${PADFOLD_TESTS_DIR}/onnx_util.cpp)
target_include_directories(padfold_onnx_testdata PUBLIC ${PADFOLD_TESTS_DIR})
# onnx_proto brings ONNX_NAMESPACE=onnx, ONNX_ML=1 and protobuf; imported include dirs are SYSTEM.
target_link_libraries(padfold_onnx_testdata PRIVATE onnx_proto protobuf::libprotobuf)

foreach(_padfold_test padding_test reference_test onnx_shapes_test)
  add_executable(${_padfold_test} ${PADFOLD_TESTS_DIR}/${_padfold_test}.cpp)
  target_include_directories(${_padfold_test} PRIVATE ${PADFOLD_GENERATOR_DIR})
  target_link_libraries(${_padfold_test} PRIVATE padfold_reference GTest::gtest_main)
endforeach()
target_link_libraries(padding_test PRIVATE padfold_core)
target_link_libraries(onnx_shapes_test PRIVATE padfold_core padfold_onnx_testdata)

gtest_discover_tests(padding_test PROPERTIES LABELS padding)
gtest_discover_tests(reference_test PROPERTIES LABELS padding)
# The ONNX cases are listed from the installed data when the tests run, not at build time.
gtest_discover_tests(onnx_shapes_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS "padding;onnx")
