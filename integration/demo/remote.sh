#!/usr/bin/env bash
# make demo-remote: the demo training (integration/demo/demo.sh) into a mount
# that replicates to an S3 bucket (a local versitygw, the tests' server),
# then a restore on a "second node": a read-only mount of the bucket on an
# empty store, every file read and compared with a plain run. Prints the
# upload figures (bytes uploaded against logical, upload lag) and the
# restore time against reading the same files from a plain directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/ckptfs}
PY=${PYTHON:-${CKPTFS_PYTHON:-$HOME/.cache/ckptfs/venv/bin/python}}
VGW=${CKPTFS_VERSITYGW:-$HOME/.cache/ckptfs/versitygw/bin/versitygw}
[ -x "$VGW" ] || { echo "demo-remote: $VGW missing: run make deps" >&2; exit 1; }
WORK=$(mktemp -d /tmp/ckptfs-remote-demo.XXXXXX)
RUN=$WORK/run PLAIN=$WORK/plain STORE=$WORK/store NODE2=$WORK/node2 STORE2=$WORK/store2
mkdir -p "$WORK/s3/ckpt" "$NODE2"
PORT=$((20000 + RANDOM % 20000))
export AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo-secret-key AWS_REGION=us-east-1
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
EP=http://127.0.0.1:$PORT URL=s3://ckpt/demo
"$VGW" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" --port 127.0.0.1:$PORT --quiet posix "$WORK/s3" >"$WORK/vgw.log" 2>&1 &
VGW_PID=$!
cleanup() {
	for d in "$RUN" "$NODE2"; do
		if grep -q " $d " /proc/self/mountinfo; then "$BIN" umount --lazy "$d" || true; fi
	done
	kill "$VGW_PID" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
sleep 1

step() { printf '\n== %s\n' "$*"; }
TRAIN=(integration/py/writers.py hf-trainer --layers 4 --width 256 --every 50 --saves 6 --keep 3)

step "reference run into a plain directory"
"$PY" "${TRAIN[@]}" --out "$RUN" 2>/dev/null | tail -1
mv "$RUN" "$PLAIN"
mkdir "$RUN"

step "mount ckptfs at $RUN replicating to $URL ($EP)"
"$BIN" mount --store "$STORE" --device-size 512MiB --remote "$URL" --endpoint "$EP" "$RUN"

step "train into the mount (the Trainer keeps the last 3 checkpoints)"
"$PY" "${TRAIN[@]}" --out "$RUN" 2> >(grep -v -e '^Writing model shards' -e 'loss_type=None' >&2) | tail -1
diff -r "$RUN" "$PLAIN" && echo "all files identical to the plain run"

step "wait for the upload to finish"
"$PY" - "$RUN" <<'PYEOF'
import json, sys, time
mnt = sys.argv[1]
last = None
for _ in range(1200):
    r = json.load(open(mnt + "/.ckptfs/stats.json"))["remote"]
    if r["pending_versions"] == 0 and r == last:
        break
    last = r
    time.sleep(0.5)
print(json.dumps(r, indent=2))
print("bytes uploaded / logical bytes uploaded: %d / %d = %.3f" % (r["bytes_uploaded"], r["logical_bytes_uploaded"], r["network_ratio"]))
print("upload lag (commit to visible root): mean %.3fs, max %.3fs" % (r["lag_mean_seconds"], r["lag_max_seconds"]))
PYEOF
"$BIN" stats "$RUN"
echo "bucket holds $(du -sb "$WORK/s3/ckpt" | cut -f1) bytes in $(find "$WORK/s3/ckpt" -type f | wc -l) objects; the live files are $(du -sb --apparent-size "$PLAIN" | cut -f1) bytes"

step "second node: read-only mount of the bucket on an empty store, restore (read every file)"
"$BIN" mount --store "$STORE2" --remote "$URL" --endpoint "$EP" --read-only "$NODE2"
evict() { "$PY" -c 'import os,sys
for root,_,fs in os.walk(sys.argv[1]):
    for f in fs:
        fd=os.open(os.path.join(root,f),os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)' "$1"; }
readall() { find "$1" -type f -print0 | xargs -0 cat >/dev/null; }
t0=$(date +%s.%N); readall "$NODE2"; t1=$(date +%s.%N)
evict "$PLAIN"
t2=$(date +%s.%N); readall "$PLAIN"; t3=$(date +%s.%N)
diff -r "$NODE2" "$PLAIN" && echo "restored files identical to the plain run"
"$PY" -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print('restore from the bucket (cold, empty store): %.2fs; read from a plain directory (page cache evicted): %.2fs; ratio %.1f' % (a, b, a/b))" \
	"$(echo "$t1 - $t0" | bc)" "$(echo "$t3 - $t2" | bc)"
"$BIN" umount "$NODE2"

step "the same read again after a remount: pieces now in the local cache (decode only, no network)"
"$BIN" mount --store "$STORE2" --remote "$URL" --endpoint "$EP" --read-only "$NODE2"
t4=$(date +%s.%N); readall "$NODE2"; t5=$(date +%s.%N)
echo "read from the replica with its cache warm: $(echo "$t5 - $t4" | bc)s"
"$BIN" umount "$NODE2"

step "ckptfs pull: copy the bucket into a new ordinary store (checks every object and every file)"
t6=$(date +%s.%N); "$BIN" pull --store "$WORK/store3" --endpoint "$EP" "$URL"; t7=$(date +%s.%N)
echo "pull took $(echo "$t7 - $t6" | bc)s"
"$BIN" umount "$RUN"
