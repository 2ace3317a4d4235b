# kvfleet_add_test(NAME name SOURCES a.cc b.cc DEPS lib1 lib2 [LABELS l1 l2] [FILTER gtest-filter]
#                  [PREFIX p/] [ENVIRONMENT VAR=value ...])
# Labels default to "unit"; integration tests pass LABELS integration.
# FILTER registers only the matching tests (a gtest filter, e.g. "-Slow.*").
# PREFIX names the tests of a binary that reruns other binaries' suites on
# another backend ("cuda_emulated/EngineTest.…"); ENVIRONMENT is set for
# each of its tests. kvfleet_add_test_run registers an existing binary's
# tests once more, under another prefix and environment (the same suites at
# another tensor-parallel degree).
# A gpu-labelled binary that finds no GPU skips every test from a global
# environment, which gtest reports without the per-test SKIPPED marker: its
# message counts as a skip too, so ctest never reports those tests passed.
# One gtest binary per call, registered with ctest through gtest discovery so
# each TEST shows up by name in the summary.
include(GoogleTest)
function(kvfleet_add_test)
  cmake_parse_arguments(T "" "NAME;FILTER;PREFIX" "SOURCES;DEPS;LABELS;ENVIRONMENT" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${T_NAME} PRIVATE
    KVFLEET_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    KVFLEET_BINARY_DIR="${PROJECT_BINARY_DIR}")
  kvfleet_add_test_run(NAME ${T_NAME} FILTER "${T_FILTER}" PREFIX "${T_PREFIX}" LABELS ${T_LABELS}
                       ENVIRONMENT ${T_ENVIRONMENT})
endfunction()

function(kvfleet_add_test_run)
  cmake_parse_arguments(T "" "NAME;FILTER;PREFIX" "LABELS;ENVIRONMENT" ${ARGN})
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
    PROPERTIES LABELS "${labels}" SKIP_REGULAR_EXPRESSION "${skip_pattern}" ENVIRONMENT "${T_ENVIRONMENT}"
    DISCOVERY_TIMEOUT 60)
endfunction()
