# vmpayload — see README.md. The two set-up commands are `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
GO_TEST_TIMEOUT ?= 75m
# Two binaries: bin/vmpayload, pure Go (CGO_ENABLED=0: build, validate,
# inspect, recipe, hook, submit, status, run; "vmpayload agent" runs the
# daemon), and bin/vmpayloadd, the agent, the one that links libvirt.
# libvirt_dlopen: libvirt.org/go/libvirt loads libvirt.so.0 with dlopen instead
# of linking it, so the daemon's package installs without libvirt-dev. The
# daemon's build and the go test/vet of the project use it; see libvirtx/doc.go.
GOTAGS ?= libvirt_dlopen
# FUZZTIME: 10s per target keeps make test's fuzz stage at about 2 minutes of
# CI's 60-minute budget (12 targets); fuzz longer by hand, e.g.
# `FUZZTIME=10m bash test/fuzz.sh`.
FUZZTIME ?= 10s

.PHONY: all build deps demo judges test test-fast bench bench-hook soak packages test-packages clean

all: build

build:
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/vmpayload ./cmd/vmpayload
	go build -tags '$(GOTAGS)' -trimpath -o bin/vmpayloadd ./cmd/vmpayloadd

deps:
	@bash test/deps.sh

# The demo: the agent on libvirt's embedded test driver with a sample job.
demo: deps build
	@bash test/demo.sh

# The full test suite: installs what it needs, starts libvirtd, runs every
# test (real libvirtd, real guests, the libvirtd-restart tests), every fuzz
# target for FUZZTIME, and the packaging checks (with the .deb under a real
# systemd in a systemd-nspawn container: VMPAYLOAD_SYSTEMD), and cloudbase-init's
# reader over the Windows payloads: its source is the checkout
# VMPAYLOAD_CLOUDBASE_INIT names, else the pinned tarball
# ../shared/third_party/cloudbase-init-c48d759.tar.gz unpacked into a cache
# (test/cloudbaseinit/source.sh, docs/windows.md); without either make test
# fails first thing. VMPAYLOAD_JUDGES=required: a test whose judge is missing
# fails instead of skipping. -p 1: the packages share one libvirtd, and some
# tests kill and restart it.
test: judges deps build
	@bash test/libvirtd.sh
	@bash test/guest/prebuild.sh
	cbi=$$(bash test/cloudbaseinit/source.sh) && VMPAYLOAD_CLOUDBASE_INIT="$$cbi" VMPAYLOAD_JUDGES=required VMPAYLOAD_LIBVIRTD=1 VMPAYLOAD_LIBVIRTD_RESTART=1 VMPAYLOAD_E2E=1 VMPAYLOAD_SYSTEMD=1 VMPAYLOAD_FRESHHOST_GO=1 go test -tags '$(GOTAGS)' -p 1 -count=1 -timeout $(GO_TEST_TIMEOUT) ./...
	@bash test/monitoring.sh
	# Every Go benchmark runs once, so none of them rots unseen (the
	# measurements of docs/benchmarks.md depend on them).
	go test -tags '$(GOTAGS)' -p 1 -count=1 -run '^$$' -bench . -benchtime 1x ./...
	@FUZZTIME=$(FUZZTIME) bash test/fuzz.sh
	@bash test/packaging/check.sh

# The judges' sources, checked before anything else is installed or run.
judges:
	@bash test/cloudbaseinit/source.sh >/dev/null

# Unit tests only (no libvirtd, no guests).
test-fast:
	go test -tags '$(GOTAGS)' -count=1 ./...

bench: deps build
	@bash test/bench.sh

# The libvirt qemu hook's cost (hyperfine; figures in docs/durability.md).
bench-hook: build
	@bash test/bench-hook.sh

# The long soak (issue 36), a benchmark: 30 min of jobs through the spool and
# the socket in a private libvirtd (SOAK_VARIANT=test: the test driver;
# real: qemu:///system, libvirtd restarted every 3 min); see test/soak.sh.
# The report goes into docs/reliability.md.
soak: build
	@bash test/soak.sh

# dist/vmpayload_<ver>_amd64.deb and dist/vmpayload-<ver>.x86_64.rpm
packages:
	@bash packaging/build.sh

# Packaging checks (as root): build both packages, check them, install, remove and purge the .deb.
test-packages:
	@bash test/packaging/check.sh

clean:
	rm -rf bin dist
