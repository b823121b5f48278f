# find_package(edt): libedt as the imported target edt::edt (include/edt:
# communicator, elastic, stores). Run the program with edtrun.
include("${CMAKE_CURRENT_LIST_DIR}/edtTargets.cmake")
