# How tests are registered, included once after include(GoogleTest) (CMakeLists.txt).
#
# The driver test double (tests/fakecuda) refuses to start where /dev/nvidiactl exists unless
# FAKECUDA_ALLOW_WITH_GPU=1, so that a program never takes it for the real driver by accident.
# The CPU tests mean to run on it, on a GPU host too (scripts/test.sh runs them there next to the
# GPU tests), so every test without the label gpu gets that variable in its ENVIRONMENT:
#
# - gtest_discover_tests: wrapped below, so every call adds it to the tests' PROPERTIES.
# - add_test: call missile_test_environment() once in a directory that uses add_test; at the end
#   of that directory it appends the variable to each of its tests not labelled gpu.
#
# Tests labelled gpu run the real shim and daemon on the real driver and get nothing.
# tests/test_environment_check.py (ctest: test_environment_check) fails for any CPU test
# that lacks the variable, so a test registered some other way does not go unnoticed.

set(MISSILE_FAKECUDA_TEST_ENV "FAKECUDA_ALLOW_WITH_GPU=1")

# The module's function, with ENVIRONMENT first in PROPERTIES (a later ENVIRONMENT given by the
# caller would replace it, which the check test reports).
function(gtest_discover_tests target)
  set(args ${ARGN})
  list(FIND args PROPERTIES at)
  if(at EQUAL -1)
    list(APPEND args PROPERTIES ENVIRONMENT ${MISSILE_FAKECUDA_TEST_ENV})
  else()
    math(EXPR at "${at} + 1")
    list(INSERT args ${at} ENVIRONMENT ${MISSILE_FAKECUDA_TEST_ENV})
  endif()
  _gtest_discover_tests(${target} ${args})
endfunction()

function(_missile_apply_test_environment)
  get_directory_property(tests TESTS)
  foreach(test IN LISTS tests)
    get_test_property(${test} LABELS labels)
    if(NOT labels OR NOT "gpu" IN_LIST labels)
      set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT ${MISSILE_FAKECUDA_TEST_ENV})
    endif()
  endforeach()
endfunction()

# For a directory that registers tests with add_test: its CPU tests get the variable once the
# directory's CMakeLists.txt is done (so labels set after add_test count).
function(missile_test_environment)
  get_directory_property(done MISSILE_TEST_ENVIRONMENT_DEFERRED)
  if(NOT done)
    set_directory_properties(PROPERTIES MISSILE_TEST_ENVIRONMENT_DEFERRED TRUE)
    cmake_language(DEFER DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}"
                   CALL _missile_apply_test_environment)
  endif()
endfunction()
