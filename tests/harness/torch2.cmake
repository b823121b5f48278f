# The PyTorch 2 runs of the Python suites (docs/python.md): the same
# registrations as on Debian's torch 1.13 (EDT_PYTHON), once more under
# EDT_TORCH2_PYTHON, the Python of the environment `make deps` makes from
# python/requirements/torch2.txt. Their names end in _torch2.
#
#   edt_torch2_test(name...): marks tests registered with EDT_TORCH2_PYTHON:
#   label torch2, and the fixture of torch2_venv, a check that the
#   environment is there and holds today's torch2.txt (venv_check.cmake).
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/venv_check.cmake)

set(EDT_TORCH2_PYTHON /opt/edt/venv-torch2/bin/python3 CACHE FILEPATH
  "Python of the PyTorch 2 environment the *_torch2 tests run on (make deps)")
edt_venv_check(torch2 ${EDT_TORCH2_PYTHON} ${CMAKE_SOURCE_DIR}/python/requirements/torch2.txt torch 2)

function(edt_torch2_test)
  edt_venv_tests(torch2 ${ARGN})
endfunction()
