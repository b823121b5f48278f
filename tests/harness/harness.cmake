# edt_add_python_test(): how every Python test is registered, so that its
# import path comes from here and not from sys.path edits in the test.
#
#   edt_add_python_test(NAME name COMMAND argv... [TIMEOUT s] [LABELS l...]
#                       [ENVIRONMENT VAR=value...] [PYTHONPATH dir...] [WITH_EDT]
#                       [PROPERTIES prop value...])
#
# PYTHONPATH is the given dirs, then tests/ (for `import harness`, and
# `from contract import contract_test`); WITH_EDT puts the built package
# (build/python and its horovod_compat) first, as the python_* suites had it,
# with PYTHONDONTWRITEBYTECODE=1.
include_guard(GLOBAL)

function(edt_add_python_test)
  cmake_parse_arguments(PARSE_ARGV 0 T "WITH_EDT" "NAME;TIMEOUT" "COMMAND;LABELS;ENVIRONMENT;PYTHONPATH;PROPERTIES")
  set(path ${T_PYTHONPATH} ${CMAKE_SOURCE_DIR}/tests)
  set(env ${T_ENVIRONMENT})
  if(T_WITH_EDT)
    # python/CMakeLists.txt's EDT_PYTHON_DIR, which other directories do not see.
    set(edt ${EDT_PYTHON_DIR})
    if(NOT edt)
      set(edt ${CMAKE_BINARY_DIR}/python)
    endif()
    list(PREPEND path ${edt} ${edt}/horovod_compat)
    list(PREPEND env PYTHONDONTWRITEBYTECODE=1)
  endif()
  list(JOIN path ":" path)
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "PYTHONPATH=${path};${env}" LABELS "${T_LABELS}"
                       TIMEOUT ${T_TIMEOUT} ${T_PROPERTIES})
endfunction()
