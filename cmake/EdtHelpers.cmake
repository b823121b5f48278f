include(GoogleTest)
include(${CMAKE_CURRENT_LIST_DIR}/EdtLayers.cmake)

# Where each module's include root lies: a folder holding one link, to the
# module's own source folder (include_roots/edt_transport/transport ->
# src/transport).
set(EDT_INCLUDE_ROOTS ${PROJECT_BINARY_DIR}/include_roots)

# edt_library(NAME SOURCES ... [FOLDER dir] [DEPS ...] [LINKS ...]): a static
# library of one module. Its include path is include/ (the public API) and
# its own include root, so "#include "transport/transport.h"" works in the
# module and in modules that list it in DEPS (directly or through their
# DEPS), and fails to compile anywhere else: a header of a layer above is
# out of reach. FOLDER is the module's folder under src/ (by default the one
# of the calling CMakeLists.txt; give it where one CMakeLists.txt defines
# modules of several folders). DEPS: libraries whose headers and code it
# uses. LINKS: edt modules linked without their headers (the module reaches
# them through include/edt only). DEPS and LINKS follow the layers of
# cmake/EdtLayers.cmake; edt_check_layers() enforces them.
function(edt_library name)
  cmake_parse_arguments(ARG "" "FOLDER" "SOURCES;DEPS;LINKS" ${ARGN})
  if(NOT ARG_FOLDER)
    file(RELATIVE_PATH ARG_FOLDER ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  if(NOT IS_DIRECTORY ${PROJECT_SOURCE_DIR}/src/${ARG_FOLDER} OR ARG_FOLDER MATCHES "^\\.\\.")
    message(FATAL_ERROR "edt_library(${name}): FOLDER ${ARG_FOLDER} is not a folder under src/")
  endif()
  set(root ${EDT_INCLUDE_ROOTS}/${name})
  get_filename_component(link_parent ${root}/${ARG_FOLDER} DIRECTORY)
  file(MAKE_DIRECTORY ${link_parent})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${ARG_FOLDER} ${root}/${ARG_FOLDER} SYMBOLIC)

  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${root}>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  foreach(linked ${ARG_LINKS})
    target_link_libraries(${name} INTERFACE $<LINK_ONLY:${linked}>)
  endforeach()
  set_target_properties(${name} PROPERTIES EDT_FOLDER ${ARG_FOLDER} EDT_USES "${ARG_DEPS};${ARG_LINKS}"
    EDT_INCLUDE_ROOT ${root})
  set_property(GLOBAL APPEND PROPERTY EDT_MODULES ${name})
endfunction()

# edt_use_headers(TARGET MODULES ...): gives a program that links libedt
# (not the modules) the headers of some modules.
function(edt_use_headers target)
  cmake_parse_arguments(ARG "" "" "MODULES" ${ARGN})
  foreach(module ${ARG_MODULES})
    target_include_directories(${target} PRIVATE $<TARGET_PROPERTY:${module},EDT_INCLUDE_ROOT>)
  endforeach()
endfunction()

# edt_modules_closure(OUT MODULES ...): MODULES and every edt module they
# use (DEPS and LINKS), through theirs: what linking them takes.
function(edt_modules_closure out)
  set(closure "")
  set(pending ${ARGN})
  while(pending)
    list(POP_FRONT pending module)
    if(NOT TARGET ${module} OR module IN_LIST closure)
      continue()
    endif()
    get_target_property(uses ${module} EDT_USES)
    if(NOT uses)  # not an edt module (Threads::Threads, nlohmann_json...)
      continue()
    endif()
    list(APPEND closure ${module})
    list(APPEND pending ${uses})
  endwhile()
  set(${out} ${closure} PARENT_SCOPE)
endfunction()

# edt_link_portable(TARGET MODULES ...): links TARGET with MODULES so that it
# needs of the system only glibc (2.35 or later), for what runs inside any
# image (edtrun, edt-warm-run, libedt_capi): with the modules' archives
# themselves (those of MODULES and of the modules they use), not their
# targets, whose link interface brings the host's libspdlog and libfmt and
# with them its libstdc++; with fmt's and spdlog's code
# (src/common/fmt_spdlog.cc); and with libstdc++ and libgcc inside, whose
# one call of glibc 2.36 is answered by src/common/arc4random.cc.
function(edt_link_portable target)
  cmake_parse_arguments(ARG "" "" "MODULES" ${ARGN})
  edt_modules_closure(modules ${ARG_MODULES})
  target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src/common/fmt_spdlog.cc)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  edt_use_headers(${target} MODULES ${modules})
  target_compile_definitions(${target} PRIVATE $<TARGET_PROPERTY:spdlog::spdlog,INTERFACE_COMPILE_DEFINITIONS>
    $<TARGET_PROPERTY:fmt::fmt,INTERFACE_COMPILE_DEFINITIONS>)
  add_dependencies(${target} ${modules})
  set(files)
  foreach(module ${modules})
    list(APPEND files $<TARGET_FILE:${module}>)
  endforeach()
  target_link_libraries(${target} PRIVATE -Wl,--start-group ${files} -Wl,--end-group Threads::Threads rt)
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  edt_own_cxx_runtime(${target})
endfunction()

# edt_own_cxx_runtime(TARGET): libstdc++ and libgcc linked in, whose one
# call of glibc 2.36 is answered by src/common/arc4random.cc.
function(edt_own_cxx_runtime target)
  target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src/common/arc4random.cc)
  target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
endfunction()

# edt_check_layers(): fails the configure if a module uses a module of a
# layer above its own. Called once, after every module is defined.
function(edt_check_layers)
  get_property(modules GLOBAL PROPERTY EDT_MODULES)
  set(errors "")
  foreach(module ${modules})
    get_target_property(folder ${module} EDT_FOLDER)
    get_target_property(uses ${module} EDT_USES)
    foreach(used ${uses})
      if(NOT used IN_LIST modules)
        continue()
      endif()
      get_target_property(used_folder ${used} EDT_FOLDER)
      edt_layer_error(error ${module} ${folder} ${used} ${used_folder})
      if(error)
        list(APPEND errors "${error}")
      endif()
    endforeach()
  endforeach()
  if(errors)
    list(JOIN errors "\n  " text)
    message(FATAL_ERROR "layer order broken:\n  ${text}")
  endif()
endfunction()

# edt_test(NAME SOURCES ... [DEPS ...] [LABELS ...]): a GoogleTest binary
# registered with CTest, one CTest test per GoogleTest case. The target
# edt_test_binaries builds them all, edt_unit_test_binaries those labelled
# unit (edt_test_binaries_target()).
function(edt_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT;RESOURCE_LOCK" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  set_property(GLOBAL APPEND PROPERTY EDT_TEST_BINARIES ${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main Threads::Threads)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(unit IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY EDT_UNIT_TEST_BINARIES ${name})
  endif()
  # RESOURCE_LOCK: what the binary's tests share on the host (ctest runs
  # them one at a time, and apart from others naming it).
  set(lock)
  if(ARG_RESOURCE_LOCK)
    set(lock RESOURCE_LOCK ${ARG_RESOURCE_LOCK})
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 30
    PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}" ${lock})
endfunction()

# edt_test_binaries_target(): the target edt_test_binaries, which builds
# every edt_test() binary and nothing else, and edt_unit_test_binaries, the
# unit tests' alone (the sanitizer build runs those, and builds no more than
# them and the programs its integration tests run). Called once, after
# every test is defined.
function(edt_test_binaries_target)
  get_property(binaries GLOBAL PROPERTY EDT_TEST_BINARIES)
  add_custom_target(edt_test_binaries DEPENDS ${binaries})
  get_property(unit_binaries GLOBAL PROPERTY EDT_UNIT_TEST_BINARIES)
  add_custom_target(edt_unit_test_binaries DEPENDS ${unit_binaries})
endfunction()
