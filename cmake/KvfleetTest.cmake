# kvfleet_add_test(NAME name SOURCES a.cc b.cc DEPS lib1 lib2 [LABELS l1 l2])
# Labels default to "unit"; integration tests pass LABELS integration.
# One gtest binary per call, registered with ctest through gtest discovery so
# each TEST shows up by name in the summary.
include(GoogleTest)
function(kvfleet_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${T_NAME} PRIVATE
    KVFLEET_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    KVFLEET_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(labels ${T_LABELS})
  if(NOT labels)
    set(labels unit)
  endif()
  gtest_discover_tests(${T_NAME}
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    PROPERTIES LABELS "${labels}"
    DISCOVERY_TIMEOUT 60)
endfunction()
