#!/usr/bin/env bash
# make demo: mount ckptfs, train a real PyTorch model that saves Hugging
# Face style checkpoints into it (rotating the oldest away), verify every
# checkpoint byte for byte against a plain-directory copy and with
# torch.load, print the report, unmount and check the store.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/ckptfs}
PY=${PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d /tmp/ckptfs-demo.XXXXXX)
MNT=$WORK/mnt PLAIN=$WORK/plain STORE=$WORK/store
mkdir -p "$MNT"
cleanup() {
	if grep -q " $MNT " /proc/self/mountinfo; then "$BIN" umount --lazy "$MNT" || true; fi
	rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

step "mount ckptfs at $MNT (store $STORE)"
"$BIN" mount --store "$STORE" "$MNT"

step "train: MLP, Adam, 10 epochs; checkpoint-N/ every epoch, keep the last 4 (unmodified torch.save)"
"$PY" integration/py/trainer.py --out "$MNT/run" --mirror "$PLAIN/run" --layout hf --keep 4 \
	--optimizer adam --width 768 --steps 1280 --every 128 | awk 'NR % 256 == 0'
ls -l "$MNT/run" "$MNT/run/$(ls "$MNT/run" | tail -1)"

step "verify: every file byte for byte against the plain copy, then torch.load"
diff -r "$MNT/run" "$PLAIN/run" && echo "all files identical"
"$PY" - "$MNT/run" <<'PYEOF'
import os, sys, torch
n = 0
for root, _, files in os.walk(sys.argv[1]):
    for f in sorted(files):
        if f.endswith((".bin", ".pt")):
            torch.load(os.path.join(root, f)); n += 1
print("torch.load read %d checkpoint files from the mount" % n)
PYEOF

step "report: what the simulated SSD wrote, against a plain filesystem (the shadow device)"
"$BIN" stats --files "$MNT"

step "unmount, then fsck --deep (rebuild every file, check every chunk)"
"$BIN" umount "$MNT"
"$BIN" fsck --deep --store "$STORE"
