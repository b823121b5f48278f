# The Keras 3 runs of the TensorFlow suites (docs/python.md): edt's own
# TensorFlow tests once more, and the Keras 3 suite, under EDT_KERAS3_PYTHON,
# the Python of the environment `make deps` makes from
# python/requirements/keras3.txt (the newest TensorFlow, whose tf.keras is
# Keras 3). Their names end in _keras3_np<N>; the check keras3_venv
# (venv_check.cmake) runs before them.
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/venv_check.cmake)

set(edt_keras3_default /opt/edt/venv-keras3/bin/python3)
set(EDT_KERAS3_PYTHON ${edt_keras3_default} CACHE FILEPATH
  "Python of the Keras 3 environment the *_keras3 tests run on (make deps)")
if(NOT EDT_KERAS3_PYTHON)  # a build configured when empty meant "none"
  set_property(CACHE EDT_KERAS3_PYTHON PROPERTY VALUE ${edt_keras3_default})
endif()
edt_venv_check(keras3 ${EDT_KERAS3_PYTHON} ${CMAKE_SOURCE_DIR}/python/requirements/keras3.txt keras 3)
