# ckptfs build, test, demo and benchmark entry points.
# `make test` and `make demo` do all their own set-up on a fresh machine.

GO      ?= go
BIN     := bin/ckptfs
PYTHON  ?= /usr/bin/python3
CACHE   := .cache
GOFLAGS_TEST ?= -count=1

.PHONY: all build deps test test-full test-unit lint demo bench fuzz clean series

# Real training series, cached under .cache/series (never committed). Each is
# 10 consecutive checkpoints of a real PyTorch training plus raw arrays.
SERIES := $(CACHE)/series
SERIES_SETS := adam sgd bf16
TRAIN := integration/py/train_series.py

series: $(foreach s,$(SERIES_SETS),$(SERIES)/$(s)/.done)

$(SERIES)/adam/.done: $(TRAIN)
	$(PYTHON) $(TRAIN) --out $(@D) --raw --optimizer adam --checkpoints 10 --steps 50
	touch $@
$(SERIES)/sgd/.done: $(TRAIN)
	$(PYTHON) $(TRAIN) --out $(@D) --raw --optimizer sgd --checkpoints 10 --steps 50
	touch $@
$(SERIES)/bf16/.done: $(TRAIN)
	$(PYTHON) $(TRAIN) --out $(@D) --raw --optimizer adamw --save-dtype bf16 --checkpoints 10 --steps 50
	touch $@

all: build

build:
	$(GO) build -o $(BIN) ./cmd/ckptfs

# System packages (fuse3, python3-torch, ...): installed when root and missing.
deps:
	@.ci/install-deps

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

test-unit:
	$(GO) test $(GOFLAGS_TEST) ./...

# The whole suite, quick variant: what CI runs.
test: deps lint build test-unit

# The long variant: more fault trials and random steps.
test-full: export CKPTFS_FULL=1
test-full: test

demo: deps build
	./$(BIN) nandsim --workload random

bench: deps build
	$(GO) test -run '^$$' -bench . -benchtime 3x ./...

clean:
	rm -rf bin $(CACHE)
