#!/usr/bin/env bash
# make demo: mount ckptfs, train a small GPT-2 (built from a config, byte
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

step "mount ckptfs at $RUN (store $STORE; a 512 MiB simulated SSD preconditioned to a worn-in state, so saves cause erases)"
"$BIN" mount --store "$STORE" --precondition --device-size 512MiB "$RUN"
echo "saves reach the store through $("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["save_mode"])' "$RUN/.ckptfs/stats.json") staging files (passthrough: the kernel serves them; daemon-written: without FUSE passthrough)"

step "train: GPT-2 (4 layers, 256 wide, 3.2 M parameters), AdamW, 300 steps; the Hugging Face Trainer saves checkpoint-N/ every 50 steps and keeps the last 3"
"$PY" "${TRAIN[@]}" --out "$RUN" 2> >(grep -v -e '^Writing model shards' -e 'loss_type=None' >&2)
ls -l "$RUN" "$RUN/$(ls "$RUN" | sort -t- -k2 -n | tail -1)"

step "verify: every file byte for byte against the plain run, then load every checkpoint back"
diff -r "$RUN" "$PLAIN" && echo "all $(find "$PLAIN" -type f | wc -l) files identical"
"$PY" - "$RUN" "$PLAIN" <<'PYEOF'
import os, sys, torch
from safetensors.torch import load_file
mnt, plain = sys.argv[1:3]
n = 0
for root, _, files in os.walk(mnt):
    for f in sorted(files):
        p = os.path.join(root, f)
        q = os.path.join(plain, os.path.relpath(p, mnt))
        if f.endswith(".safetensors"):
            a, b = load_file(p), load_file(q)
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), p
            n += 1
        elif f.endswith((".pt", ".pth", ".bin")):
            torch.load(p, weights_only=False)
            n += 1
print("loaded %d checkpoint files from the mount (safetensors tensors equal to the plain run's)" % n)
PYEOF

step "report: what the simulated SSD wrote, against a plain filesystem (the shadow device)"
"$BIN" stats --files "$RUN"

step "unmount, then fsck --deep (rebuild every file, check every chunk)"
"$BIN" umount "$RUN"
"$BIN" fsck --deep --store "$STORE"
