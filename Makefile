# Perigee: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
COMPONENTS := lab gateway api webui bench

.PHONY: help setup build test lint fuzz demo demo-down bench bench-quick image image-test vm vm-test clean

help:
	@echo "make demo        install, build, bring up satlab + the appliance, print the dashboard URL and login"
	@echo "make demo-down   remove everything demo made"
	@echo "make test        every suite: Rust, Python, web unit, browser end-to-end, namespace integration"
	@echo "make bench       the full benchmark (docs/benchmarks.md, bench/results/latest.json)"
	@echo "make bench-quick one scenario of each kind"
	@echo "make lint        clippy, ruff, mypy, eslint, tsc"
	@echo "make fuzz        the gateway's parsers under libFuzzer, 10 min each (FUZZ_SECONDS=...)"
	@echo "make image       build the Docker images;  make vm: build the VM image"

setup:
	@scripts/setup

build: setup
	@set -e; for c in $(COMPONENTS); do $(MAKE) --no-print-directory -C $$c build; done

# Runs every suite even when one fails, then fails loudly naming the failed ones.
test: build
	@failed=""; for c in $(COMPONENTS); do \
	  echo "=== $$c: test ==="; \
	  $(MAKE) --no-print-directory -C $$c test || failed="$$failed $$c"; \
	done; \
	if [ -n "$$failed" ]; then echo "FAILED suites:$$failed"; exit 1; fi; \
	echo "all suites passed: $(COMPONENTS)"

lint: setup
	@failed=""; for c in $(COMPONENTS) images; do $(MAKE) --no-print-directory -C $$c lint || failed="$$failed $$c"; done; \
	if [ -n "$$failed" ]; then echo "lint failed in:$$failed"; exit 1; fi

demo: build
	@scripts/demo up

demo-down:
	@scripts/demo down

fuzz: setup
	@$(MAKE) --no-print-directory -C gateway fuzz

bench: build
	@.venv/bin/python -m bench.run --full

bench-quick: build
	@.venv/bin/python -m bench.run --quick

image: build
	@images/build

image-test: image
	@images/test

vm: build
	@images/vm/build

vm-test: vm
	@images/vm/test

clean:
	rm -rf gateway/target gateway/fuzz/target lab/emulator/target webui/dist
