#!/usr/bin/env bash
# make demo: mount ckptfs through its Python API, train a small GPT-2 (built from a config, byte
# vocabulary, a built-in text) with the Hugging Face Trainer, which saves
# checkpoint-N/ directories into the mount (model.safetensors, optimizer.pt,
# ...) and rotates the oldest away (save_total_limit); verify every file byte
# for byte against the same seeded training run into a plain directory, load
# every checkpoint back (safetensors and torch.load), print the report,
# unmount and check the store.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/ckptfs}
PY=${PYTHON:-${CKPTFS_PYTHON:-$HOME/.cache/ckptfs/venv/bin/python}}
if ! "$PY" -c 'import torch, transformers, safetensors, accelerate' 2>/dev/null; then
	echo "demo: $PY lacks torch/transformers/safetensors/accelerate: run make deps (it builds the venv)" >&2
	exit 1
fi
WORK=$(mktemp -d /tmp/ckptfs-demo.XXXXXX)
# The training runs twice at the same path, $RUN: first into a plain
# directory (then moved to $PLAIN), then into the mount, so that paths the
# Trainer records in its files (training_args.bin) agree.
RUN=$WORK/run PLAIN=$WORK/plain STORE=$WORK/store
cleanup() {
	if grep -q " $RUN " /proc/self/mountinfo; then "$BIN" umount --lazy "$RUN" || true; fi
	rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }
TRAIN=(integration/py/writers.py hf-trainer --layers 4 --width 256 --every 50 --saves 6 --keep 3)

step "reference run: the same training into a plain directory"
"$PY" "${TRAIN[@]}" --out "$RUN" 2>/dev/null | tail -1
mv "$RUN" "$PLAIN"
mkdir "$RUN"

# Mount, train, verify and report through the Python API (python/ckptfs,
# the package the wheel installs; here from the checkout, with this build).
PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} CKPTFS_BINARY=$BIN "$PY" integration/demo/demo_train.py \
	--run "$RUN" --plain "$PLAIN" --store "$STORE" -- "${TRAIN[@]}" 2> >(grep -v -e '^Writing model shards' -e 'loss_type=None' >&2)

step "fsck --deep of the unmounted store (rebuild every file, check every chunk)"
"$BIN" fsck --deep --store "$STORE"

step "the daemon's log: no error"
if grep -E 'level=(error|fatal)|panic:' "$STORE/ckptfs.log"; then
	echo "demo: the daemon logged errors (above)" >&2
	exit 1
fi
echo "no error in $(wc -l <"$STORE/ckptfs.log") lines of $STORE/ckptfs.log"
