# `cmake --install` into a fresh prefix, then the installed padfold compiles a bundle with the
# runtime sources it finds beside itself; a copy of the program without its data fails clearly.
# cmake -DBUILD=<build dir> -DWORK=<scratch dir> -DSPEC=<spec> -P install_test.cmake
file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD}" --prefix "${WORK}/prefix"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
foreach(f bin/padfold share/padfold/runtime/include/padfold_runtime.h
          share/padfold/runtime/CMakeLists.txt share/padfold/include/HalideRuntime.h)
  if(NOT EXISTS "${WORK}/prefix/${f}")
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

execute_process(COMMAND "${WORK}/prefix/bin/padfold" compile "${SPEC}" -o "${WORK}/bundle"
                        --target host
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "installed padfold compile failed (${rc}):\n${out}\n${err}")
endif()
foreach(f manifest.json runtime/include/padfold_runtime.h include/HalideRuntime.h)
  if(NOT EXISTS "${WORK}/bundle/${f}")
    message(FATAL_ERROR "the installed padfold's bundle lacks ${f}")
  endif()
endforeach()

# The program alone, without share/padfold beside it: a clear error, no bundle.
file(COPY "${WORK}/prefix/bin/padfold" DESTINATION "${WORK}/alone/bin")
execute_process(COMMAND "${WORK}/alone/bin/padfold" compile "${SPEC}" -o "${WORK}/alone/bundle"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "data directory .*alone/share/padfold lacks runtime/include/padfold_runtime.h")
  message(FATAL_ERROR "expected a data directory error, got (${rc}):\n${out}\n${err}")
endif()
if(EXISTS "${WORK}/alone/bundle")
  message(FATAL_ERROR "a failed compile left ${WORK}/alone/bundle")
endif()
message(STATUS "installed padfold: ok")
