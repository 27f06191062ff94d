# Perigee: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
COMPONENTS := lab gateway api webui bench

.PHONY: help setup build test test-packaging lint fuzz soak demo demo-down bench bench-quick image image-test vm vm-test deb deb-test setup-test clean

help:
	@echo "make demo        install, build, bring up satlab with a gateway at each end (terminal, hub), print each one's dashboard URL and login"
	@echo "make demo-down   remove everything demo made"
	@echo "make test        every suite: Rust, Python, web unit, browser end-to-end, namespace integration, packaging"
	@echo "                 (two at a time, one table at the end: scripts/test-suites --list)"
	@echo "make bench       the full benchmark (docs/benchmarks.md, bench/results/latest.json)"
	@echo "make bench-quick one scenario of each kind, quick (results in /tmp/perigee-bench-quick, never docs/)"
	@echo "make soak        the fault-injection soak, about 30 min (a short one runs in make test)"
	@echo "make lint        clippy, ruff, mypy, eslint, tsc"
	@echo "make fuzz        the gateway's parsers under libFuzzer, 10 min each (FUZZ_SECONDS=...)"
	@echo "make image       build the Docker images;  make vm: build the VM image (from the .debs)"
	@echo "make deb         the Debian packages perigee-gateway and perigee-management (+ lintian)"
	@echo "make deb-test    install, upgrade and purge the packages in a bare bookworm container"
	@echo "make setup-test  scripts/setup && make build in a bare bookworm container (stock Debian 12)"

setup:
	@scripts/setup

build: setup
	@set -e; for c in $(COMPONENTS); do $(MAKE) --no-print-directory -C $$c build; done

# Every suite (scripts/test-suites --list) even when one fails, two at a time: the ones that share the kernel
# (namespaces, Hybla, satlab) never together, beside them the ones that share nothing with them (compiles, packages,
# images, the VM, the unprivileged suites). Each suite's log is printed in full when it fails, its tail when it
# passes; the run ends with one table (suite, kind, wall time, result) and fails naming the failed suites.
# Suites that need Docker skip (saying why) where no daemon can be started, or fail when
# PERIGEE_REQUIRE_ROOT_TESTS is set.
test: build
	@scripts/test-suites

# The .debs with lintian, their install/upgrade/purge test and the stock-Debian setup test; the container images
# from the binaries `make build` made (PERIGEE_RUST_FROM=host PERIGEE_WEB_FROM=host) and the compose stack's
# test; the VM from the .debs and its boot test (both check the first start ends with the API and the gateway on
# one config version).
test-packaging: build
	@scripts/test-suites deb deb-test setup-test image image-test vm vm-test

lint: setup
	@failed=""; for c in $(COMPONENTS) images; do $(MAKE) --no-print-directory -C $$c lint || failed="$$failed $$c"; done; \
	if [ -n "$$failed" ]; then echo "lint failed in:$$failed"; exit 1; fi

# Says what it will change on this machine before it installs anything (scripts/demo notice).
demo:
	@scripts/demo notice
	@$(MAKE) --no-print-directory build
	@scripts/demo up

demo-down:
	@scripts/demo down

fuzz: setup
	@$(MAKE) --no-print-directory -C gateway fuzz

# The peer-path benchmark's plaintext rows run gateway/target/release/perigee-plaintext (never shipped).
bench: build
	@$(MAKE) --no-print-directory -C gateway build-plaintext
	@.venv/bin/python -m bench.run --full

# Quick figures are no published figures: they go to a scratch tree, never to bench/results or docs/.
BENCH_QUICK_OUT ?= /tmp/perigee-bench-quick
bench-quick: build
	@$(MAKE) --no-print-directory -C gateway build-plaintext
	@.venv/bin/python -m bench.run --quick --output-dir $(BENCH_QUICK_OUT)

soak: build
	@$(MAKE) --no-print-directory -C bench soak

image: build
	@images/build

image-test: image
	@images/test

vm: deb
	@images/vm/build

vm-test: vm
	@images/vm/test

deb: build
	@images/deb/build

deb-test: deb
	@images/deb/upgrade-test

setup-test:
	@images/setup-test

clean:
	rm -rf gateway/target gateway/fuzz/target lab/emulator/target webui/dist
