# Tests of the C runtime (runtime/), against a fake bundle: a hand-written kernel library
# (runtime_test_fake.c) placed in ${CMAKE_CURRENT_BINARY_DIR}/fake_bundle with a manifest.json.
# include()d from tests/CMakeLists.txt.
if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
  message(STATUS "padfold runtime tests: Linux only, skipped")
  return()
endif()
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(_pf_fake_arch "x86-64")
  set(_pf_fake_target "x86-64-linux-sse41")
  set(_pf_fake_features "\"sse41\"")
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(_pf_fake_arch "arm-64")
  set(_pf_fake_target "arm-64-linux")
  set(_pf_fake_features "")
else()
  message(STATUS "padfold runtime tests: no fake bundle for ${CMAKE_SYSTEM_PROCESSOR}, skipped")
  return()
endif()
find_package(GTest REQUIRED)
find_package(Threads REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
include(GoogleTest)

set(_pf_fake_dir ${CMAKE_CURRENT_BINARY_DIR}/fake_bundle)
set(_pf_halide_inc ${PADFOLD_HALIDE_RUNTIME_INCLUDE_DIR})

function(_pf_fake_library name)
  add_library(${name} ${ARGN} ${CMAKE_CURRENT_LIST_DIR}/runtime_test_fake.c)
  target_include_directories(${name} PRIVATE
    $<TARGET_PROPERTY:padfold_runtime_core,INTERFACE_INCLUDE_DIRECTORIES>)
  target_include_directories(${name} SYSTEM PRIVATE ${_pf_halide_inc})
  target_compile_definitions(${name} PRIVATE FAKE_TARGET="${_pf_fake_target}")
  set_target_properties(${name} PROPERTIES C_STANDARD 99 C_EXTENSIONS OFF)
endfunction()

# The bundle's library, in the layout `padfold compile` writes, and one without the entry symbol.
_pf_fake_library(padfold_fake_bundle MODULE)
set_target_properties(padfold_fake_bundle PROPERTIES
  OUTPUT_NAME padfold_fake PREFIX lib SUFFIX .so
  LIBRARY_OUTPUT_DIRECTORY $<1:${_pf_fake_dir}/${_pf_fake_target}>)
_pf_fake_library(padfold_fake_noentry MODULE)
target_compile_definitions(padfold_fake_noentry PRIVATE FAKE_NO_ENTRY)
# The same registry linked statically, for pf_registry_open.
_pf_fake_library(padfold_fake_static STATIC)
target_compile_definitions(padfold_fake_static PRIVATE FAKE_ENTRY=fake_static_registry)

set(_pf_kernel_json [=[
    {"layer": "scale", "function": "pf_fake_scale", "op": "scale", "buffers": [
      {"name": "input", "role": "input", "dtype": "float32", "layout": "NCHW", "shape": [1, 3, 4, 5], "strides": [60, 20, 5, 1]},
      {"name": "output", "role": "output", "dtype": "float32", "layout": "NCHW", "shape": [1, 3, 4, 5], "strides": [60, 20, 5, 1]}]},
    {"layer": "add_bias", "function": "pf_fake_add_bias", "op": "add_bias", "buffers": [
      {"name": "input", "role": "input", "dtype": "float32", "layout": "NCHW", "shape": [1, 3, 4, 5], "strides": [60, 20, 5, 1]},
      {"name": "bias", "role": "bias", "dtype": "float32", "layout": "C", "shape": [3], "strides": [1]},
      {"name": "output", "role": "output", "dtype": "float32", "layout": "NCHW", "shape": [1, 3, 4, 5], "strides": [60, 20, 5, 1]}]},
    {"layer": "checked", "function": "pf_fake_checked", "op": "copy", "buffers": [
      {"name": "input", "role": "input", "dtype": "float32", "layout": "C", "shape": [2], "strides": [1]},
      {"name": "output", "role": "output", "dtype": "float32", "layout": "C", "shape": [2], "strides": [1]}]}]=])
file(GENERATE OUTPUT ${_pf_fake_dir}/manifest.json CONTENT
"{\"format\": \"padfold-bundle\", \"format_version\": 1, \"padfold_version\": \"0.1.0\",
  \"model\": \"fake\", \"spec\": \"fake.json\",
  \"targets\": [{\"target\": \"${_pf_fake_target}\", \"arch\": \"${_pf_fake_arch}\", \"bits\": 64,
    \"os\": \"linux\", \"features\": [${_pf_fake_features}], \"dir\": \"${_pf_fake_target}\",
    \"shared_library\": \"${_pf_fake_target}/libpadfold_fake.so\",
    \"static_library\": \"${_pf_fake_target}/libpadfold_fake.a\",
    \"registry_source\": \"${_pf_fake_target}/registry.c\"}],
  \"kernels\": [${_pf_kernel_json}]}
")

add_executable(padfold_runtime_tests ${CMAKE_CURRENT_LIST_DIR}/runtime_test_open.cpp
                                     ${CMAKE_CURRENT_LIST_DIR}/runtime_test_run.cpp)
target_link_libraries(padfold_runtime_tests PRIVATE padfold_runtime padfold_fake_static
                      GTest::gtest_main Threads::Threads nlohmann_json::nlohmann_json)
target_include_directories(padfold_runtime_tests SYSTEM PRIVATE ${_pf_halide_inc})
target_compile_definitions(padfold_runtime_tests PRIVATE
  FAKE_BUNDLE_DIR="${_pf_fake_dir}" FAKE_TARGET="${_pf_fake_target}"
  FAKE_NOENTRY_LIB="$<TARGET_FILE:padfold_fake_noentry>")
add_dependencies(padfold_runtime_tests padfold_fake_bundle padfold_fake_noentry)
gtest_discover_tests(padfold_runtime_tests DISCOVERY_MODE PRE_TEST)

# The header is valid C99: a C program using only padfold_runtime.h, run on the fake bundle.
add_executable(padfold_runtime_c_example ${CMAKE_CURRENT_LIST_DIR}/runtime_c_example.c)
target_link_libraries(padfold_runtime_c_example PRIVATE padfold_runtime)
set_target_properties(padfold_runtime_c_example PROPERTIES C_STANDARD 99 C_EXTENSIONS OFF)
target_compile_options(padfold_runtime_c_example PRIVATE -pedantic-errors -Werror)
add_dependencies(padfold_runtime_c_example padfold_fake_bundle)
add_test(NAME padfold_runtime_c_example
         COMMAND padfold_runtime_c_example ${_pf_fake_dir} scale)
set_tests_properties(padfold_runtime_c_example PROPERTIES
  PASS_REGULAR_EXPRESSION "output\\[0\\] = 2")
