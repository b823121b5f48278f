# What each test shares with others, keyed by test name, so that `ctest -j`
# (make test) runs at once only tests that can: every CI-only property of a
# test is here, apart from its CMakeLists.txt, which says what it runs.
#   LOCK: what the test takes for itself (ctest RESOURCE_LOCK): no two tests
#     naming one lock run at once. Name what is shared, never one lock for all.
#   PROCESSORS: the cores it keeps busy (ctest -j N runs tests whose
#     PROCESSORS add up to N at most): a test of 4 workers that compute.
#   COST: its seconds on the CI machine (2 cores). A fresh clone has no
#     timings of its own yet (Testing/Temporary/CTestCostData.txt); with
#     these, ctest -j starts the longest first instead of last.
# Included at the end of the top-level CMakeLists.txt, after every test is
# defined. A test that moves keeps its name and so its entry here.

set(EDT_TEST_RESOURCES_FILE ${PROJECT_BINARY_DIR}/edt_test_resources/properties.cmake)
set(edt_test_resources_text "")

# edt_test_resources(NAME [LOCK lock...] [PROCESSORS n] [COST seconds])
function(edt_test_resources name)
  cmake_parse_arguments(ARG "" "PROCESSORS;COST" "LOCK" ${ARGN})
  set(properties "")
  if(ARG_LOCK)
    list(JOIN ARG_LOCK "\\;" locks)
    string(APPEND properties " RESOURCE_LOCK \"${locks}\"")
  endif()
  if(ARG_PROCESSORS)
    string(APPEND properties " PROCESSORS ${ARG_PROCESSORS}")
  endif()
  if(ARG_COST)
    string(APPEND properties " COST ${ARG_COST}")
  endif()
  set(edt_test_resources_text "${edt_test_resources_text}set_tests_properties([=[${name}]=] PROPERTIES${properties})\n"
    PARENT_SCOPE)
endfunction()

# --- what tests share ------------------------------------------------------
# The Slurm harness (tests/harness/slurm.py) is one per machine: bridge
# edtsh0, 198.18.190.0/24, netns edtsh-*, /run/edtsh.state.
edt_test_resources(slurm_harness LOCK edt_slurm_harness COST 23)
edt_test_resources(slurm_backend LOCK edt_slurm_harness COST 70)
edt_test_resources(slurm_harness_dynamic LOCK edt_slurm_harness COST 23)
edt_test_resources(slurm_backend_dynamic LOCK edt_slurm_harness COST 70)
edt_test_resources(slurm_harness_plain LOCK edt_slurm_harness COST 23)
edt_test_resources(slurm_backend_plain LOCK edt_slurm_harness COST 70)
edt_test_resources(demo_slurm LOCK edt_slurm_harness COST 25)
edt_test_resources(slurm_user_mode LOCK edt_slurm_harness COST 60)
edt_test_resources(slurm_user_mode_dynamic LOCK edt_slurm_harness COST 60)
# Builds in the build tree itself (ninja: one at a time per tree); the
# layering tests take the same lock in tests/layering/CMakeLists.txt.
edt_test_resources(mnist_cpp_build LOCK edt_build_tree COST 36)
# contract_test.Edtd's default block, 127.250-254.0.0/24 by pid: the tests
# that give no block of their own.
edt_test_resources(api_contract LOCK edt_contract_block)
edt_test_resources(job_files LOCK edt_contract_block)
# demo_cluster_types.py's bridge edtctypes0 and block 198.18.214.0/25.
edt_test_resources(cluster_types_deepspeed_pdsh LOCK edt_ctypes_bridge COST 120)
edt_test_resources(cluster_types_deepspeed_openmpi LOCK edt_ctypes_bridge COST 65)
edt_test_resources(cluster_types_megatron LOCK edt_ctypes_bridge COST 85)
edt_test_resources(container_isolation COST 11)
edt_test_resources(container_isolation_userns COST 13)
edt_test_resources(packaging COST 11)
# The console's end-to-end tests: a bridge edtcon<pid % 50> each, one output
# folder (test-output/console) and a chromium each, which takes a core.
foreach(test console_e2e console_jupyter_e2e console_a11y_e2e console_walkthrough_e2e)
  edt_test_resources(${test} LOCK edt_console)
endforeach()

# --- the longest, so that they start first ---------------------------------
edt_test_resources(slurm_cluster_bridge COST 70)
# Two TensorFlow workers that compute (only where edt's TensorFlow ops are built).
if(TARGET edt_tf_ops)
  edt_test_resources(horovod_tf2_mnist_np2 PROCESSORS 2 COST 45)
  edt_test_resources(horovod_tf2_keras_mnist_np2 PROCESSORS 2 COST 60)
  edt_test_resources(horovod_tf2_mnist_elastic PROCESSORS 2 COST 120)
  edt_test_resources(python_tensorflow_np2 PROCESSORS 2 COST 15)
  edt_test_resources(python_tensorflow_np3 PROCESSORS 2 COST 30)
  foreach(test python_tensorflow_keras3_np2 python_tensorflow_elastic_keras3_np2 python_keras3_np2)
    edt_test_resources(${test} PROCESSORS 2 COST 15)
  endforeach()
  # Horovod's TensorFlow suites (tests/horovod): seconds measured at a load
  # average of 10-30; the np2 suite is the longest test of all.
  edt_test_resources(horovod_test_tensorflow_np2 PROCESSORS 2 COST 600)
  edt_test_resources(horovod_test_tensorflow_np3 PROCESSORS 2 COST 630)
  edt_test_resources(horovod_test_tensorflow_np4 PROCESSORS 2 COST 940)
  foreach(np 2 3 4)
    edt_test_resources(horovod_test_tensorflow2_keras_np${np} PROCESSORS 2 COST 100)
  endforeach()
  edt_test_resources(horovod_test_tensorflow_keras_np2 PROCESSORS 2 COST 30)
  edt_test_resources(python_tensorflow_elastic_np2 PROCESSORS 2 COST 15)
endif()
edt_test_resources(slurm_cluster COST 46)
edt_test_resources(horovod_elastic_scenarios COST 40)
edt_test_resources(python_elastic_scenarios COST 36)
edt_test_resources(horovod_user_loop_scenarios COST 20)
edt_test_resources(edtrun_elastic_scenarios COST 35)
edt_test_resources(console_e2e COST 29)
edt_test_resources(console_walkthrough_e2e COST 25)
edt_test_resources(container_network_bridge COST 25)
edt_test_resources(horovod_test_torch_np4 COST 23)
edt_test_resources(drain_scenario COST 23)
edt_test_resources(sched_live COST 30)
edt_test_resources(console_a11y_e2e COST 20)
edt_test_resources(edtrun_integration COST 20)
edt_test_resources(horovod_test_torch_np2 COST 16)
# The PyTorch 2 runs (tests/harness/torch2.cmake): slower to start than 1.13's.
edt_test_resources(python_torch2 COST 60)
edt_test_resources(horovod_test_torch_torch2 COST 45)
edt_test_resources(console_jupyter_e2e COST 16)
edt_test_resources(edtd_crash COST 16)
edt_test_resources(api_starvation COST 15)
# make demo and make demo-torch: one bridge (edtdemo0) and address block.
edt_test_resources(demo_scenario LOCK edt_demo_bridge COST 30)
edt_test_resources(demo_torch_scenario LOCK edt_demo_bridge COST 14)
edt_test_resources(mnist_np4 COST 9)
edt_test_resources(python_np4 COST 9)
# tests/images: its own registry, mirror and edtd on free loopback ports, block 127.236.0.0/24.
edt_test_resources(image_pull COST 50)
# tests/images/any_image_test.py: its edtd on block 127.237.0.0/24.
edt_test_resources(any_image COST 30)
file(STRINGS ${PROJECT_SOURCE_DIR}/fuzz/targets.txt edt_fuzz_targets)
foreach(target ${edt_fuzz_targets})
  edt_test_resources(fuzz_${target} COST 21)
endforeach()

# ctest reads the directories' CTestTestfile.cmake in add_subdirectory()
# order, each one's included files before its own tests, and
# set_tests_properties there reaches tests of any directory read before. So
# the properties go to a directory of their own, added last.
file(CONFIGURE OUTPUT ${EDT_TEST_RESOURCES_FILE} CONTENT "${edt_test_resources_text}")
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/edt_test_resources/source/CMakeLists.txt
  CONTENT "set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES [=[${EDT_TEST_RESOURCES_FILE}]=])\n")
add_subdirectory(${PROJECT_BINARY_DIR}/edt_test_resources/source ${PROJECT_BINARY_DIR}/edt_test_resources)
