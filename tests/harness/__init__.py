"""The one test harness of the end-to-end tests (tests/README.md).

Every test, the demo (scripts/demo.py) and the benchmarks that start edtd,
edtrun or an sshd do it through these modules, so a change to how edtd
starts or stops is made once:

    harness.edtd    Edtd: edtd on a data dir, its token, /healthz, stop,
                    restart and cleanup; wait_healthy() and stop() for an
                    edtd process started elsewhere
    harness.edtrun  edtrun in the foreground or background, its output
                    parsed, and the checks that nothing is left running
    harness.sshd    Sshd: an OpenSSH sshd on 127.0.0.2 and 127.0.0.3 with
                    throwaway keys, the "remote hosts" of edtrun's tests
    harness.users   Tenants: an edtd's API as a tenant sees it (users,
                    clusters waited for by state, ssh into a container)
    harness.ports   free_port(): ports outside the ephemeral range
    harness.mounts  unmount_under(): the mounts a test's edtd left
    harness.processes  kill_until_gone(): SIGKILL until a set of processes is gone
    harness.network  in_use(): whether a block a test network wants is taken
    harness.slurm   SlurmHarness: a real Slurm cluster on this machine

The package is found through PYTHONPATH, which the ctest registration sets
(edt_add_python_test() in tests/harness/harness.cmake); no test edits
sys.path. The modules import nothing outside the standard library.
"""
