# Tests that run on one of make deps' PyPI environments (torch2.cmake,
# keras3.cmake).
#
#   edt_venv_check(NAME PYTHON LOCK DISTRIBUTION MAJOR): the test NAME_venv,
#   fixture edt_NAME_venv: PYTHON's environment is there, holds today's LOCK
#   and DISTRIBUTION at version MAJOR.x (venv_check.py); else it fails,
#   saying to run `make deps`.
#   edt_venv_tests(NAME test...): the tests need that fixture (so ctest
#   counts them failed, unrun, without it) and get the label NAME.
include_guard(GLOBAL)

function(edt_venv_check name python lock distribution major)
  add_test(NAME ${name}_venv COMMAND ${EDT_PYTHON} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/venv_check.py ${python}
    ${lock} ${distribution} ${major})
  set_tests_properties(${name}_venv PROPERTIES FIXTURES_SETUP edt_${name}_venv LABELS "python;${name}" TIMEOUT 60)
endfunction()

function(edt_venv_tests name)
  set_tests_properties(${ARGN} PROPERTIES FIXTURES_REQUIRED edt_${name}_venv)
  set_property(TEST ${ARGN} APPEND PROPERTY LABELS ${name})
endfunction()
