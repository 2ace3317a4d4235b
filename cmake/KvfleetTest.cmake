# kvfleet_add_test(NAME name SOURCES a.cc b.cc DEPS lib1 lib2 [LABELS l1 l2] [FILTER gtest-filter]
#                  [PREFIX p/])
# Labels default to "unit"; integration tests pass LABELS integration.
# FILTER registers only the matching tests (a gtest filter, e.g. "-Slow.*").
# PREFIX names the tests of a binary that reruns other binaries' suites on
# another backend ("cuda_emulated/EngineTest.…").
# A gpu-labelled binary that finds no GPU skips every test from a global
# environment, which gtest reports without the per-test SKIPPED marker: its
# message counts as a skip too, so ctest never reports those tests passed.
# One gtest binary per call, registered with ctest through gtest discovery so
# each TEST shows up by name in the summary.
include(GoogleTest)
function(kvfleet_add_test)
  cmake_parse_arguments(T "" "NAME;FILTER;PREFIX" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${T_NAME} PRIVATE
    KVFLEET_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    KVFLEET_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(labels ${T_LABELS})
  if(NOT labels)
    set(labels unit)
  endif()
  set(skip_pattern "\\[  SKIPPED \\]")
  if("gpu" IN_LIST labels)
    set(skip_pattern "\\[  SKIPPED \\]|no GPU to run the CUDA backend on")
  endif()
  set(filter)
  if(T_FILTER)
    set(filter TEST_FILTER ${T_FILTER})
  endif()
  if(T_PREFIX)
    list(APPEND filter TEST_PREFIX ${T_PREFIX})
  endif()
  gtest_discover_tests(${T_NAME}
    ${filter}
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    PROPERTIES LABELS "${labels}" SKIP_REGULAR_EXPRESSION "${skip_pattern}"
    DISCOVERY_TIMEOUT 60)
endfunction()
