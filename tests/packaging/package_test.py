"""The Debian package end to end, without touching the system.

CPack packs the built tree (the same install rules as `make install`);
dpkg-deb unpacks the package into a scratch root; everything then runs from
that root with a clean environment (no LD_LIBRARY_PATH, no build tree on any
path): edtrun runs a libedt program that finds the library through its
RPATH, edtd finds its console relative to itself, the Python package imports
and trains under edtrun, a user's CMake project finds libedt with
find_package(edt), and the systemd unit verifies. A second install with
`cmake --install --prefix` and DESTDIR checks that the prefix reaches the unit.
"""

import contextlib
import glob
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import pytest

import harness.edtd
from harness.ports import free_port

BUILD = os.environ["EDT_BUILD_DIR"]
SOURCE = os.environ["EDT_SOURCE_DIR"]
PYTHON = os.environ["EDT_PYTHON"]
WEB_DIST = os.environ.get("EDT_WEB_DIST", "")
PROGRAMS = ["edtd", "edt", "edtrun", "edt-bench"]


def run(argv, env=None, timeout=300, check=True):
    done = subprocess.run([str(a) for a in argv], env=env, timeout=timeout, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if check:
        assert done.returncode == 0, f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stdout}"
    return done


def clean_env(root, **extra):
    """Only the scratch root's programs and the system's: nothing from the build tree."""
    env = {"PATH": f"{root}/usr/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ.get("HOME", "/root"),
           "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    out = tmp_path_factory.mktemp("cpack")
    run([os.environ["CPACK"], "--config", f"{BUILD}/CPackConfig.cmake", "-B", out], timeout=500)
    debs = glob.glob(f"{out}/edt_*.deb")
    assert len(debs) == 1, f"cpack made {debs}"
    return debs[0]


@pytest.fixture(scope="module")
def root(deb, tmp_path_factory):
    root = tmp_path_factory.mktemp("root")
    run(["dpkg-deb", "-x", deb, root])
    return root


def python_dir(root):
    return root / "usr/lib/python3/dist-packages"


def test_control_fields_and_maintainer_scripts(deb, tmp_path):
    fields = dict(line.split(": ", 1) for line in
                  run(["dpkg-deb", "-f", deb, "Package", "Version", "Architecture", "Depends", "Recommends"])
                  .stdout.splitlines())
    assert fields["Package"] == "edt"
    cmake_version = open(f"{SOURCE}/CMakeLists.txt").read().split("project(edt VERSION ", 1)[1].split()[0]
    assert fields["Version"] == cmake_version
    assert fields["Architecture"] == run(["dpkg", "--print-architecture"]).stdout.strip()
    depends = [d.split()[0] for d in fields["Depends"].split(", ")]
    # Named by hand (programs edtd and edtrun run) and found by dpkg-shlibdeps (libraries).
    for package in ["bubblewrap", "iproute2", "nftables", "openssh-client", "openssh-server", "python3", "libc6", "libstdc++6",
                    "libsqlite3-0", "libssl3"]:
        assert package in depends, f"Depends lacks {package}: {fields['Depends']}"
    assert "python3-torch" in fields["Recommends"]
    control = tmp_path / "control"
    run(["dpkg-deb", "-e", deb, control])
    for script in ["postinst", "prerm", "postrm"]:
        assert os.access(control / script, os.X_OK), f"{script} is missing or not executable"
        run(["sh", "-n", control / script])


def test_files_are_where_the_system_looks(root):
    usr = root / "usr"
    expected = [f"bin/{p}" for p in PROGRAMS] + [
        "lib/libedt.so", "lib/libedt.so.0", "include/edt/communicator.h", "include/edt/elastic.h",
        "lib/cmake/edt/edtConfig.cmake", "lib/cmake/edt/edtConfigVersion.cmake",
        "lib/python3/dist-packages/edt/__init__.py", "lib/python3/dist-packages/edt/torch/__init__.py",
        "lib/python3/dist-packages/horovod_compat/horovod/torch/__init__.py",
        "lib/python3/dist-packages/edt-horovod-fallback.pth", "lib/systemd/system/edtd.service"]
    if WEB_DIST:
        expected.append("share/edt/web/index.html")
    missing = [path for path in expected if not (usr / path).exists()]
    assert not missing, f"not in the package: {missing}"
    assert (usr / "lib/python3/dist-packages/edt/libedt_capi.so").exists(), "the runtime library is missing"
    # Nothing of the build machine's paths leaks into the package's programs.
    for program in PROGRAMS:
        rpath = run(["readelf", "-d", usr / "bin" / program]).stdout
        assert BUILD not in rpath, f"{program} has a RUNPATH into the build tree:\n{rpath}"


def test_libedt_is_found_through_rpath(root):
    program = root / "usr/bin/edt-bench"
    dynamic = run(["readelf", "-d", program]).stdout
    assert "libedt.so.0" in dynamic and "$ORIGIN/../lib" in dynamic, dynamic
    ldd = run(["ldd", program], env=clean_env(root)).stdout
    line = next(line for line in ldd.splitlines() if "libedt.so.0" in line)
    assert f"{root}/usr/bin/../lib/libedt.so.0" in line, ldd


def test_edtrun_runs_a_libedt_program_from_the_package(root):
    out = run([root / "usr/bin/edtrun", "-np", "2", "edt-bench", "allreduce", "--min-bytes", "4K",
               "--max-bytes", "64K", "--check"], env=clean_env(root), timeout=120).stdout
    # Rank 0's table: one row per size, 4 KiB to 64 KiB, no wrong element.
    rows = [line.split()[1:] for line in out.splitlines() if line.startswith("[0]<stdout>:")]
    rows = [row for row in rows if row and row[0].isdigit()]
    assert [row[0] for row in rows] == ["4096", "8192", "16384", "32768", "65536"], out
    assert all(row[-1] == "0" for row in rows), out


def test_programs_answer_help(root):
    for program in ["edtd", "edt", "edtrun"]:
        out = run([root / "usr/bin" / program, "--help"], env=clean_env(root)).stdout
        assert "usage" in out.lower() or "options" in out.lower(), out


def logged(log, text, limit=30):
    """Whether edtd's log shows `text` within `limit` seconds: edtd answers
    /healthz as soon as its API listens, and writes the line that names its
    console a moment later, once its reconciler started."""
    deadline = time.monotonic() + limit
    while text not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    return text in log.read_text()


@contextlib.contextmanager
def edtd_running(root, data, *flags):
    """The scratch root's edtd on a free port; yields (api, log path); SIGTERM at the end."""
    log = data.parent / "edtd.log"
    daemon = harness.edtd.Edtd(str(root / "usr/bin/edtd"), str(data), ["--gpus", "T=1", *flags], log_path=str(log),
                               log_mode="w", ssh_port=False, env=clean_env(root))
    daemon.start()
    try:
        yield daemon.url, log
    finally:
        daemon.proc.send_signal(signal.SIGTERM)
        assert daemon.proc.wait(timeout=30) == 0, log.read_text()


@pytest.fixture
def data(tmp_path):
    """A data dir for edtd whose parents all let others pass (pytest's
    tmp_path is under 0700 directories): with user namespaces, edtd's
    default, containers' roots bind from it."""
    parent = tempfile.mkdtemp(prefix="edt-pkg-")
    os.chmod(parent, 0o711)
    yield pathlib.Path(parent) / "data"
    shutil.rmtree(parent, ignore_errors=True)


def test_installed_edtd_finds_its_console_and_refuses_a_bad_flag(root, tmp_path, data):
    edtd = root / "usr/bin/edtd"
    bad = run([edtd, "--data-dir", data, "--web-dir", tmp_path / "no-such-dir"], env=clean_env(root), check=False)
    assert bad.returncode != 0 and "--web-dir" in bad.stdout, bad.stdout
    assert not data.exists(), "a refused start made the data dir"

    with edtd_running(root, data, "--network", "loopback") as (api, log):  # not the host's edt0
        console = root / "usr/share/edt/web"
        if WEB_DIST:
            assert logged(log, f"console {console}"), log.read_text()
            with urllib.request.urlopen(f"{api}/", timeout=5) as page:
                assert page.read().decode() == (console / "index.html").read_text()
        else:
            assert logged(log, "console not built"), log.read_text()
        assert (data / "admin.token").exists()


def scratch_block():
    pid = os.getpid()
    return f"127.{210 + pid % 40}.{(pid // 40) % 250}.0/24"


def test_installed_edtd_gives_containers_its_own_tools(root, data):
    """An installed edtd binds its portable tools and Python package at
    /run/edt-install (laid out as under its prefix, with the usercustomize.py
    that makes its horovod_compat a fallback), and a prefix outside
    /usr whole at its own path: edtrun, edt-bench (with libedt through
    RPATH) and the Python package of the scratch root work inside the
    containers, across the cluster's two over SSH. The scratch root is under
    pytest's 0700 directories, which the containers' unprivileged roots
    could not pass: edtd binds it for them."""
    with edtd_running(root, data, "--network", "loopback", "--address-range", scratch_block(),
                      "--ssh-port", str(free_port("0.0.0.0"))) as (api, _):
        env = clean_env(root, EDT_API=api, EDT_TOKEN=(data / "admin.token").read_text().strip())
        edt = root / "usr/bin/edt"
        try:
            run([edt, "cluster", "create", "pkg", "--framework", "horovod", "--containers", "2", "--wait"], env=env,
                timeout=120)
            out = run([edt, "run", "pkg", "--", "sh", "-c",
                       "command -v edtrun; python3 -c 'import edt._edt as e; print(e.__file__)'; "
                       "python3 -c 'import horovod; print(horovod.__file__)'; "
                       "edtrun -np 2 --hostfile /etc/mpi/hostfile edt-bench allreduce --max-bytes 4K --check"],
                      env=env, timeout=180).stdout
        finally:
            run([edt, "cluster", "delete", "pkg", "--wait"], env=env, timeout=120, check=False)
    lines = out.splitlines()
    assert lines[0] == "/run/edt-install/bin/edtrun", out
    assert lines[1].startswith("/run/edt-install/lib/python3/dist-packages/edt/_edt"), out
    assert lines[2] == "/run/edt-install/lib/python3/dist-packages/horovod_compat/horovod/__init__.py", out
    assert "2 ranks on 2 host(s)" in out, out
    rows = [line.split()[1:] for line in lines if line.startswith("[0]<stdout>:")]
    rows = [row for row in rows if row and row[0].isdigit()]
    assert rows and all(row[-1] == "0" for row in rows), out


def test_installed_edtd_gives_its_tools_to_an_image_not_made_for_edt(root):
    """images/any_image_test.py against the package's edtd: an image with
    only its own Python, whose /usr is not the host's (nor the package's),
    runs edtrun -np 2 and the package's runtime from /run/edt-install. An
    edtd installed under /usr reaches images the same way."""
    done = run(["/usr/bin/python3", f"{SOURCE}/tests/images/any_image_test.py", "--edtd", root / "usr/bin/edtd",
                "--edt", root / "usr/bin/edt", "--addresses", scratch_block(), "--tools-at", "/run/edt-install"],
               env=clean_env(root, PYTHONPATH=f"{SOURCE}/tests"), timeout=240, check=False)
    assert done.returncode == 0, done.stdout


def test_python_package_imports_and_trains_from_the_package(root):
    site = python_dir(root)
    env = clean_env(root, PYTHONPATH=str(site))
    where = run([PYTHON, "-c", "import edt, edt.torch, edt._edt; print(edt._edt.__file__)"], env=env).stdout
    assert where.startswith(str(site)), where
    # The .pth fallback (processed for a site dir, as for /usr/lib/python3/dist-packages).
    horovod = run([PYTHON, "-c", f"import site; site.addsitedir({str(site)!r}); import horovod.torch as hvd; "
                   "print(hvd.__file__, __import__('horovod').__version__)"], env=clean_env(root)).stdout
    assert horovod.startswith(str(site)) and "+edt" in horovod, horovod
    script = ("import torch, edt.torch as hvd; hvd.init(); "
              "t = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum); "
              "print('rank', hvd.rank(), 'of', hvd.size(), 'sum', int(t.item()))")
    out = run([root / "usr/bin/edtrun", "-np", "2", PYTHON, "-c", script], env=env, timeout=180).stdout
    assert "rank 0 of 2 sum 3" in out and "rank 1 of 2 sum 3" in out, out


def test_a_users_cmake_project_finds_libedt(root, tmp_path):
    build = tmp_path / "consumer"
    cmake = os.environ["CMAKE"]
    run([cmake, "-S", f"{SOURCE}/tests/packaging/consumer", "-B", build, "-G", "Ninja",
         f"-DCMAKE_PREFIX_PATH={root}/usr", f"-DEDT_PROBE_SOURCE={SOURCE}/src/launcher/communicator_probe.cc"],
        env=clean_env(root))
    run([cmake, "--build", build], env=clean_env(root))
    out = run([root / "usr/bin/edtrun", "-np", "2", build / "consumer"], env=clean_env(root), timeout=120).stdout
    assert out.count("sum 3") == 2, out


def test_systemd_unit_verifies(root, tmp_path):
    unit = (root / "usr/lib/systemd/system/edtd.service").read_text()
    assert "ExecStart=/usr/bin/edtd --data-dir /var/lib/edt" in unit, unit
    for line in ["Restart=on-failure", "KillMode=process", "StateDirectory=edt", "WantedBy=multi-user.target"]:
        assert line in unit.splitlines(), f"{line} missing:\n{unit}"
    assert shutil.which("systemd-analyze"), "systemd-analyze is missing: scripts/install-deps.sh installs systemd"
    # verify wants ExecStart's program to exist: point it at the scratch root's.
    (tmp_path / "edtd.service").write_text(unit.replace("/usr/bin/edtd", f"{root}/usr/bin/edtd"))
    done = run(["systemd-analyze", "verify", "--man=no", tmp_path / "edtd.service"], check=False)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout


def test_make_install_honours_prefix_and_destdir(tmp_path):
    dest = tmp_path / "dest"
    prefix = "/opt/edt-test"
    env = dict(os.environ, DESTDIR=str(dest))
    run([os.environ["CMAKE"], "--install", BUILD, "--prefix", prefix], env=env)
    installed = dest / prefix.lstrip("/")
    for program in PROGRAMS:
        assert (installed / "bin" / program).exists()
    assert (installed / "lib/python3/dist-packages/edt/__init__.py").exists()
    assert f"ExecStart={prefix}/bin/edtd " in (installed / "lib/systemd/system/edtd.service").read_text()
    assert not os.path.exists(prefix), "the install went to the prefix, not under DESTDIR"
