# The Halide half of the generator: algorithms (what each op computes) and the bundle writer.
# Included from generator/CMakeLists.txt; schedules live in schedules/.

add_library(padfold_algorithms STATIC algorithm.cpp)
target_include_directories(padfold_algorithms PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(padfold_algorithms PUBLIC padfold_core Halide::Halide)

add_library(padfold_bundle STATIC bundle.cpp bundle_dir.cpp lower.cpp process.cpp target.cpp)
target_link_libraries(padfold_bundle PUBLIC padfold_algorithms padfold_schedules padfold_templates
                                     nlohmann_json::nlohmann_json)
target_compile_definitions(padfold_bundle PRIVATE
  PADFOLD_VERSION="${PROJECT_VERSION}"
  PADFOLD_RUNTIME_DIR="${PROJECT_SOURCE_DIR}/runtime"
  PADFOLD_HALIDE_INCLUDE_DIR="${PADFOLD_HALIDE_INCLUDE_DIR}")
