# The PyTorch 2 runs of the Python suites (docs/python.md): the same
# registrations as on Debian's torch 1.13 (EDT_PYTHON), once more under
# EDT_TORCH2_PYTHON, the Python of the environment `make deps` makes from
# python/requirements/torch2.txt. Their names end in _torch2.
#
#   edt_torch2_test(name...): marks tests registered with EDT_TORCH2_PYTHON:
#   label torch2, and the fixture torch2_venv, a check that the environment
#   is there and holds today's torch2.txt. Without it that check fails,
#   saying to run `make deps`, and ctest counts the tests as failed, unrun.
include_guard(GLOBAL)

set(EDT_TORCH2_PYTHON /opt/edt/venv-torch2/bin/python3 CACHE FILEPATH
  "Python of the PyTorch 2 environment the *_torch2 tests run on (make deps)")

add_test(NAME torch2_venv COMMAND ${EDT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/torch2_venv.py ${EDT_TORCH2_PYTHON}
  ${CMAKE_SOURCE_DIR}/python/requirements/torch2.txt)
set_tests_properties(torch2_venv PROPERTIES FIXTURES_SETUP edt_torch2_venv LABELS "python;torch2" TIMEOUT 60)

function(edt_torch2_test)
  set_tests_properties(${ARGN} PROPERTIES FIXTURES_REQUIRED edt_torch2_venv)
  set_property(TEST ${ARGN} APPEND PROPERTY LABELS torch2)
endfunction()
