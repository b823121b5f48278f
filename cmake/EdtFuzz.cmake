# The fuzz targets of fuzz/: a clang build of their own (libFuzzer is
# clang's; the rest of edt may build with GCC), made as an external project
# in <build>/fuzz, and one test per target, labelled fuzz, that runs it for
# EDT_FUZZ_SECONDS. `make fuzz` runs them longer.
option(EDT_FUZZ "Build the fuzz targets (fuzz/) with clang and run each for a while in the tests" ON)
set(EDT_FUZZ_SECONDS 20 CACHE STRING "How long each fuzz target runs as a test, in seconds")
set(EDT_FUZZ_JOBS 2 CACHE STRING "Parallel compile jobs of the fuzz targets' build")
if(NOT EDT_FUZZ)
  return()
endif()
find_program(EDT_FUZZ_CXX NAMES clang++ clang++-14 DOC "The compiler of the fuzz targets")
if(NOT EDT_FUZZ_CXX)
  message(FATAL_ERROR "the fuzz targets need clang: install clang and libclang-rt-14-dev "
                      "(scripts/install-deps.sh), or configure with -DEDT_FUZZ=OFF")
endif()

include(ExternalProject)
set(fuzz_build ${PROJECT_BINARY_DIR}/fuzz)
ExternalProject_Add(edt_fuzz
  SOURCE_DIR ${PROJECT_SOURCE_DIR}/fuzz
  BINARY_DIR ${fuzz_build}
  CMAKE_ARGS -DCMAKE_CXX_COMPILER=${EDT_FUZZ_CXX} -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
  BUILD_COMMAND ${CMAKE_COMMAND} --build ${fuzz_build} -j ${EDT_FUZZ_JOBS}
  INSTALL_COMMAND ""
  # Its sources are edt's parsers: let its own build decide what changed.
  BUILD_ALWAYS ON)

file(STRINGS ${PROJECT_SOURCE_DIR}/fuzz/targets.txt fuzz_targets)
foreach(target ${fuzz_targets})
  add_test(NAME fuzz_${target} COMMAND ${PROJECT_SOURCE_DIR}/fuzz/run.sh ${fuzz_build} ${target} ${EDT_FUZZ_SECONDS})
  math(EXPR fuzz_timeout "${EDT_FUZZ_SECONDS} + 120")
  set_tests_properties(fuzz_${target} PROPERTIES LABELS fuzz TIMEOUT ${fuzz_timeout})
endforeach()
