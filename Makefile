# The commands a newcomer runs: `make demo` and `make test`.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=
# Extra ctest flags (e.g. -R REGEX); no test is retried: one that fails
# once is a defect.
CTEST_FLAGS ?=
# How many tests ctest runs at once: most wait on processes, sleeps and
# sockets, not a core; cmake/EdtTestResources.cmake keeps apart the tests
# that share something and counts the cores of those that compute.
TEST_JOBS ?= 4
# make install: where to (DESTDIR, if set, is put in front, as usual).
PREFIX ?= /usr/local
# make fuzz: how long each fuzz target runs, and which (fuzz/targets.txt).
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= $(shell cat fuzz/targets.txt)
# make test-asan: its build folder, and the integration tests it runs (those
# whose processes are all edt's own programs; docs/testing.md says why).
ASAN_BUILD ?= build-asan
ASAN_INTEGRATION ?= ^(api_hostile|api_contract|edtrun_integration|edtrun_elastic_scenarios|net_collectives|container_isolation)$$

.PHONY: all build deps configure test unit fuzz asan-build test-asan demo demo-torch demo-slurm bench bench-deps install package clean slurm-up slurm-down

all: build

deps:
	scripts/install-deps.sh

# The benchmark-only peers (Horovod 0.28.1 built from source: 10+ minutes)
# in /opt/edt/venv-bench, for bench/horovod; neither make test nor CI needs it.
bench-deps:
	scripts/install-bench-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The whole suite: unit tests, multi-process integration tests, python tests.
test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j $(TEST_JOBS) $(CTEST_FLAGS) \
	  || { $(CURDIR)/scripts/ctest_failures.py .; exit 1; }

# Only the fast in-process tests.
unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit

# Each fuzz target for FUZZ_SECONDS (make test runs each for 20 s). What one
# finds is saved under $(BUILD)/fuzz/crashes; docs/testing.md.
fuzz: configure
	cmake --build $(BUILD) -j $(JOBS) --target edt_fuzz
	for t in $(FUZZ_TARGETS); do fuzz/run.sh $(BUILD)/fuzz $$t $(FUZZ_SECONDS) || exit 1; done

# The unit tests and the integration tests of ASAN_INTEGRATION, built with
# ASan and UBSan in $(ASAN_BUILD): only the unit tests' binaries and the
# programs those integration tests run are built (asan-build). The edt CLI
# and the integration tests' gtest binaries are not: none of these runs
# them. console_components (the web console's own unit tests, JavaScript)
# needs the console's npm build, which is not made.
asan-build:
	cmake -S . -B $(ASAN_BUILD) -G Ninja $(CMAKE_FLAGS) -DEDT_SANITIZE=address,undefined -DEDT_FUZZ=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target edt_unit_test_binaries edtd edtrun edtrun-probe edt-warm-run \
	  edt-bench edt-bench-elastic net-collectives-check

test-asan: asan-build
	cd $(ASAN_BUILD) && ctest --output-on-failure --timeout 600 -j $(TEST_JOBS) -L unit -E '^console_components$$' $(CTEST_FLAGS) \
	  || { $(CURDIR)/scripts/ctest_failures.py .; exit 1; }
	cd $(ASAN_BUILD) && ctest --output-on-failure --timeout 600 -j $(TEST_JOBS) -R '$(ASAN_INTEGRATION)' $(CTEST_FLAGS) \
	  || { $(CURDIR)/scripts/ctest_failures.py .; exit 1; }

# edtd, edt, edtrun, edt-bench, libedt and its headers and CMake package, the
# Python package, the web console and edtd's systemd unit (docs/install.md).
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# The Debian package: $(BUILD)/edt_<version>_<arch>.deb.
package: build
	cmake --build $(BUILD) --target package

# The reference scenario (needs root: edtd makes sandboxes); see README.md:
# horovodrun ... tensorflow2_mnist.py on 2, then on 4 containers, then the
# elastic run. DEMO_FLAGS: more flags of scripts/demo.py (e.g.
# --tf-step-divisor=1 for every step the example asks for).
DEMO_FLAGS ?=
demo: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target demo_tools
	scripts/demo.py --build $(BUILD) $(DEMO_FLAGS)

# The same scenario in PyTorch: edtrun ... train_mnist.py on 2, then on 4.
demo-torch: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target demo_tools
	scripts/demo.py --build $(BUILD) --framework torch $(DEMO_FLAGS)

# The PyTorch scenario with edtd placing the containers on a Slurm cluster
# that tests/harness/slurm.py builds on this machine (edtd --backend slurm).
demo-slurm: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target demo_tools
	scripts/demo.py --build $(BUILD) --backend slurm --framework torch $(DEMO_FLAGS)

# A real Slurm cluster on this machine (needs root): nodes are network
# namespaces on bridge edtsh0; tests/harness/slurm.py prints the
# `export SLURM_CONF=...` to use. E.g. make slurm-up SLURM_UP_FLAGS='--nodes 4'.
SLURM_UP_FLAGS ?=
slurm-up:
	/usr/bin/python3 tests/harness/slurm.py up $(SLURM_UP_FLAGS)

slurm-down:
	/usr/bin/python3 tests/harness/slurm.py down

clean:
	rm -rf $(BUILD)
