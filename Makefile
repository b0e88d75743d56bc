# ckptfs build, test, demo and benchmark entry points.
# `make test` and `make demo` do all their own set-up on a fresh machine:
# system packages (deps), the binary (build), and the real training series
# that codec tests and benchmarks read (series).

GO      ?= go
BIN     := bin/ckptfs
PYTHON  ?= /usr/bin/python3
CACHE   := .cache
# Tests that need python3-torch, numpy, protoc or /dev/fuse fail instead of
# skipping when these are missing: deps installs them.
export CKPTFS_REQUIRE_DEPS := 1
# Today's writers (torch 2.x, transformers, safetensors, lightning) live in a
# venv outside the repository (.ci/install-venv, integration/py/requirements.txt);
# the writers' tests and the demo run its python.
export CKPTFS_VENV   ?= $(HOME)/.cache/ckptfs/venv
export CKPTFS_PYTHON ?= $(CKPTFS_VENV)/bin/python

.PHONY: all build install deps lint test test-full test-unit demo demo-remote bench device-bin wheel xfstests stress fuzz report clean series tier-eval

all: build

# The version ckptfs version prints: git describe of the checkout, stamped
# at link time (without git, the binary falls back to its build information).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS := $(if $(VERSION),-X main.version=$(VERSION))
PREFIX  ?= /usr/local
DESTDIR ?=

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ckptfs

# Installs bin/ckptfs as $(DESTDIR)$(PREFIX)/bin/ckptfs, building it only if
# missing (so "make build && sudo make install" needs no Go under sudo), and
# links mount(8)'s helper to it: mount -t fuse.ckptfs runs
# /sbin/mount.fuse.ckptfs (mount(8) looks in /sbin only, whatever PREFIX).
$(BIN):
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ckptfs

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)/sbin
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/ckptfs
	ln -sfn $(PREFIX)/bin/ckptfs $(DESTDIR)/sbin/mount.fuse.ckptfs

# System packages (fuse3, python3-torch, ...): installed when root and missing;
# then the writers' venv, rebuilt only when requirements.txt changes.
deps:
	@.ci/install-deps

# Real training series, cached under .cache/series (never committed). Each is
# 10 consecutive checkpoints, one per epoch, of a real PyTorch training (fixed
# data set, cosine learning rate), plus raw arrays for codec benchmarks.
# adam-stream is the harsh variant: fresh data every step, constant rate.
SERIES      := $(CACHE)/series
SERIES_SETS := adam sgd bf16 adam-stream
TRAIN       := integration/py/train_series.py

series: deps $(foreach s,$(SERIES_SETS),$(SERIES)/$(s)/.done)

$(SERIES)/adam/.done: $(TRAIN)
	$(PYTHON) $(TRAIN) --out $(@D) --raw --optimizer adam --checkpoints 10 --steps 128
	touch $@
$(SERIES)/sgd/.done: $(TRAIN)
	$(PYTHON) $(TRAIN) --out $(@D) --raw --optimizer sgd --checkpoints 10 --steps 128
	touch $@
$(SERIES)/bf16/.done: $(TRAIN)
	$(PYTHON) $(TRAIN) --out $(@D) --raw --optimizer adamw --save-dtype bf16 --checkpoints 10 --steps 128
	touch $@
$(SERIES)/adam-stream/.done: $(TRAIN)
	$(PYTHON) $(TRAIN) --out $(@D) --raw --optimizer adam --checkpoints 10 --steps 50 --data stream --schedule constant
	touch $@

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

test-unit:
	$(GO) test -count=1 -timeout 30m ./...

# The packages whose goroutines share state (the filesystem, the store)
# again under the race detector, which needs cgo (gcc: make deps).
test-race:
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 30m ./fs/... ./chain/...

# The whole suite, quick variant: what CI runs.
test: deps lint build series test-unit test-race

# The long variant: more fault trials, random steps and fuzz-corpus damage.
test-full: export CKPTFS_FULL := 1
test-full: test

# Mount, train a small GPT-2 with the Hugging Face Trainer into it, verify,
# report, unmount.
demo: deps build
	BIN=$(BIN) PYTHON=$(CKPTFS_PYTHON) integration/demo/demo.sh

# Two "nodes" (two mounts, two gloo ranks saving torch.distributed.checkpoint)
# replicating to one S3 run (a local versitygw) and a reader that follows
# them; then upload figures and a restore from the bucket on an empty store
# against plain GETs of the same files.
demo-remote: deps build
	BIN=$(BIN) PYTHON=$(CKPTFS_PYTHON) integration/demo/remote.sh

# Measures ckptfs on this machine (replays of the series, codec speed, mount
# throughput against a plain directory and a go-fuse loopback, training
# slowdown, 4 GiB files) and writes docs/BENCHMARKS.md, docs/benchmarks.json
# and docs/img/*.png. About a quarter of an hour on 2 cores.
bench: deps build series
	$(GO) run ./integration/benchrun --bin $(BIN) --python $(PYTHON) --series $(SERIES) --out docs

# Static binaries for a lent many-core machine without Go, and the script
# that runs the save-speed figures there (integration/benchrun/device.sh).
device-bin:
	CGO_ENABLED=0 $(GO) build -ldflags '-s -w $(LDFLAGS)' -o .device/ckptfs ./cmd/ckptfs
	CGO_ENABLED=0 $(GO) build -ldflags '-s -w' -o .device/benchrun ./integration/benchrun

# The Python wheels (python/): the package and a static ckptfs program, one
# wheel per machine type, in dist/. Their version is the program's own.
WHEEL_BUILD := $(CACHE)/wheel
wheel: build
	rm -f dist/ckptfs-*.whl
	for arch in amd64:x86_64 arm64:aarch64; do \
		CGO_ENABLED=0 GOARCH=$${arch%%:*} $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' \
			-o $(WHEEL_BUILD)/$${arch%%:*}/ckptfs ./cmd/ckptfs && \
		$(PYTHON) python/build_wheel.py --binary $(WHEEL_BUILD)/$${arch%%:*}/ckptfs --arch $${arch##*:} \
			--version "$$($(BIN) version | cut -d' ' -f2)" --out dist || exit 1; \
	done

# The generic "quick" group of fstests (xfstests, from ../shared/xfstests/)
# against ckptfs mounts through mount -t fuse.ckptfs: pass/fail/not-run, and
# a failure on any test not in integration/xfstests/expected-failures.txt.
# Twice: in numeric order, then the stress tests first; a daemon's error in
# its log fails it too. Root; about 50 minutes; not part of make test
# (docs/POSIX.md).
xfstests: build
	BIN=$(BIN) integration/xfstests/run.sh

# The random-operation tests (in process and against the binary, with
# SIGKILLs) and fsstress, seed after seed, for STRESS_MINUTES (default 60),
# until one fails (integration/stress.sh; docs/POSIX.md). Root, like
# xfstests: it builds fsstress from ../shared/xfstests/.
STRESS_MINUTES ?= 60
stress: deps build
	STRESS_MINUTES=$(STRESS_MINUTES) BIN=$(BIN) integration/stress.sh

# Codec ratio and speed table (docs/CODECS.md).
report: series
	CKPTFS_REPORT=1 $(GO) test -count=1 -run 'TestReport' -v ./encode/

# What an archive tier's lossy schemes do to the series' models and to a
# resumed training (docs/ARCHIVE.md).
tier-eval: deps series
	$(CKPTFS_PYTHON) integration/py/tier_eval.py --series $(SERIES)/adam
	$(CKPTFS_PYTHON) integration/py/tier_eval.py --series $(SERIES)/adam-stream

# Each fuzz target for FUZZTIME (default 60s).
FUZZTIME ?= 60s
FUZZ_TARGETS := \
	./encode:FuzzDecode ./encode:FuzzDecodeHigh16 ./encode:FuzzRoundTrip ./encode:FuzzGrouped ./encode:FuzzScaled ./encode:FuzzJoinSparse \
	./encode/detect:FuzzDetect ./encode/detect:FuzzTorchZip ./encode/detect:FuzzTorchLegacy \
	./encode/detect:FuzzNpy ./encode/detect:FuzzSafetensors ./encode/detect:FuzzCaffe \
	./encode/detect:FuzzSolverstate ./encode/detect:FuzzPickle ./encode/detect:FuzzDCP \
	./encode/pickle:FuzzPickle \
	./nandsim:FuzzDecodeState ./nandsim:FuzzOps ./meta/extent:FuzzSet ./meta:FuzzRecords ./meta:FuzzDecodeJournal ./chain:FuzzStagingNames ./chain:FuzzCommitFileSpare ./chain:FuzzZipMembers \
	./chain/remote:FuzzMerge

fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "== $$fn ($$pkg)"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; done

clean:
	rm -rf bin $(CACHE)
