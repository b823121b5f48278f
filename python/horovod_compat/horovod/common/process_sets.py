from edt.common.process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set  # noqa: F401
