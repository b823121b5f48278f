# The layers of edt, lowest first. A module may use (DEPS or LINKS in
# edt_library) modules of its own layer or of a layer below, never above:
#
#   common        status, units, net, io, log, process, cpu: used by all
#   kernels       reduce kernels and dtype tables (a leaf)
#   rendezvous    the stores ranks meet through
#   transport     channels (shm, tcp), Backoff, topology, the factory
#   collectives   algorithms and the Communicator (include/edt/communicator.h)
#   elastic       membership, elastic state
#   engine        Horovod-style request engine; sees only include/edt of what
#                 is below it (LINKS edt_collectives)
#   launcher      edtrun
#   sched         the GPU scheduling policy: pure, on common only
#   image         the image store: OCI layers unpacked and checked, imports
#   control       edtd
#   cli           edt
#   python, bench, examples: programs on top of it all
#
# A module's layer is the first folder of its FOLDER (control/model ->
# control). This file holds no targets: cmake -P scripts include it too.
set(EDT_LAYERS common kernels rendezvous transport collectives elastic engine launcher sched image control cli python
    bench examples)

# edt_layer_of(<out> <folder>): the layer index of a module folder, or -1.
function(edt_layer_of out folder)
  string(REGEX REPLACE "/.*" "" layer "${folder}")
  list(FIND EDT_LAYERS "${layer}" index)
  set(${out} ${index} PARENT_SCOPE)
endfunction()

# edt_layer_error(<out> <module> <folder> <used> <used_folder>): a message
# when module (in folder) may not use `used` (in used_folder), else empty.
function(edt_layer_error out module folder used used_folder)
  edt_layer_of(mine "${folder}")
  edt_layer_of(theirs "${used_folder}")
  set(message "")
  if(mine LESS 0)
    set(message "${module}: folder ${folder} is in no layer of EDT_LAYERS (cmake/EdtLayers.cmake)")
  elseif(theirs GREATER mine)
    set(message "${module} (layer of ${folder}) uses ${used} (${used_folder}), a layer above it (the order is in cmake/EdtLayers.cmake)")
  endif()
  set(${out} "${message}" PARENT_SCOPE)
endfunction()
