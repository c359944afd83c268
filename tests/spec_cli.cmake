# Spec parser, CLI and JSON Schema tests. Included from tests/CMakeLists.txt.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)
set(PADFOLD_REPO_DIR ${CMAKE_CURRENT_LIST_DIR}/..)

add_executable(spec_test ${CMAKE_CURRENT_LIST_DIR}/spec_test.cpp)
target_link_libraries(spec_test PRIVATE padfold_core GTest::gtest_main)
target_compile_definitions(spec_test PRIVATE PADFOLD_EXAMPLES_DIR="${PADFOLD_REPO_DIR}/examples")
gtest_discover_tests(spec_test)

add_executable(cli_test ${CMAKE_CURRENT_LIST_DIR}/cli_test.cpp)
target_link_libraries(cli_test PRIVATE padfold_core GTest::gtest_main)
target_compile_definitions(cli_test PRIVATE PADFOLD_BIN="$<TARGET_FILE:padfold>"
                                            PADFOLD_EXAMPLES_DIR="${PADFOLD_REPO_DIR}/examples")
add_dependencies(cli_test padfold)
gtest_discover_tests(cli_test)

# The examples must validate against the JSON Schema (python3-jsonschema, Debian's /usr/bin/python3).
add_test(NAME spec_schema
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/schema_test.py
                 ${PADFOLD_REPO_DIR}/generator/spec.schema.json ${PADFOLD_REPO_DIR}/examples)

# Random mutations of the examples: the parser rejects them cleanly or accepts valid ones.
add_executable(spec_fuzz_test ${CMAKE_CURRENT_LIST_DIR}/spec_fuzz_test.cpp)
target_link_libraries(spec_fuzz_test PRIVATE padfold_core GTest::gtest_main)
target_compile_definitions(spec_fuzz_test PRIVATE PADFOLD_EXAMPLES_DIR="${PADFOLD_REPO_DIR}/examples")
gtest_discover_tests(spec_fuzz_test)
