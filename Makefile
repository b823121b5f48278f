# The commands a newcomer runs: `make demo` and `make test`.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=
# Extra ctest flags (e.g. -R REGEX); no test is retried: one that fails
# once is a defect.
CTEST_FLAGS ?=
# make install: where to (DESTDIR, if set, is put in front, as usual).
PREFIX ?= /usr/local

.PHONY: all build deps configure test unit demo bench install package clean

all: build

deps:
	scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The whole suite: unit tests, multi-process integration tests, python tests.
test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600 $(CTEST_FLAGS)

# Only the fast in-process tests.
unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit

# edtd, edt, edtrun, edt-bench, libedt and its headers and CMake package, the
# Python package, the web console and edtd's systemd unit (docs/install.md).
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# The Debian package: $(BUILD)/edt_<version>_<arch>.deb.
package: build
	cmake --build $(BUILD) --target package

# The reference scenario (needs root: edtd makes sandboxes); see README.md.
demo: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target demo_tools
	scripts/demo.py --build $(BUILD)

clean:
	rm -rf $(BUILD)
