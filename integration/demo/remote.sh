#!/usr/bin/env bash
# make demo-remote: two training "nodes" and a reader that follows them,
# on one S3 bucket (a local versitygw, the tests' server).
#
# Two ranks (gloo, one process each) save torch.distributed.checkpoint
# every few seconds, rank r into node r's ckptfs mount, both replicating
# to s3://ckpt/run under their own writer names. A third mount, read-only
# and --follow on an empty store, shows the union of both trees; a watcher
# loads each step the moment its .metadata shows and checks every tensor.
# Then: bytes uploaded per writer against logical, upload lag, and a
# restore (a fresh union mount on an empty store, every file read) against
# reading the same bytes from the bucket with plain GETs.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin/ckptfs}
PY=${PYTHON:-${CKPTFS_PYTHON:-$HOME/.cache/ckptfs/venv/bin/python}}
VGW=${CKPTFS_VERSITYGW:-$HOME/.cache/ckptfs/versitygw/bin/versitygw}
[ -x "$VGW" ] || { echo "demo-remote: $VGW missing: run make deps" >&2; exit 1; }
STEPS=${STEPS:-1,2,3,4,5,6}
SCALE=${SCALE:-16} # ~24 MB a rank a step
WORK=$(mktemp -d /tmp/ckptfs-remote-demo.XXXXXX)
N0=$WORK/node0 N1=$WORK/node1 FOLLOW=$WORK/follower RESTORE=$WORK/restore
mkdir -p "$WORK/s3/ckpt" "$N0" "$N1" "$FOLLOW" "$RESTORE"
PORT=$((20000 + RANDOM % 20000))
export AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo-secret-key AWS_REGION=us-east-1
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
EP=http://127.0.0.1:$PORT URL=s3://ckpt/run
"$VGW" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" --port 127.0.0.1:$PORT --quiet posix "$WORK/s3" >"$WORK/vgw.log" 2>&1 &
VGW_PID=$!
cleanup() {
	for d in "$N0" "$N1" "$FOLLOW" "$RESTORE"; do
		if grep -q " $d " /proc/self/mountinfo; then "$BIN" umount --lazy "$d" || true; fi
	done
	kill "$VGW_PID" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
sleep 1

step() { printf '\n== %s\n' "$*"; }

step "two writers: node-0 and node-1, each a ckptfs mount replicating to $URL"
for i in 0 1; do
	d=$WORK/node$i
	"$BIN" mount --store "$WORK/store$i" --device-size 1GiB --remote "$URL" --endpoint "$EP" --remote-writer "node-$i" "$d"
	echo "node-$i: $d"
done

step "a reader on a third store: read-only, --follow, the union of both writers"
"$BIN" mount --store "$WORK/store-follow" --remote "$URL" --endpoint "$EP" --read-only --follow --follow-interval 500ms "$FOLLOW"
"$PY" integration/py/dcp_ranks.py watch --dir "$FOLLOW" --steps "$STEPS" --scale "$SCALE" --timeout 600 >"$WORK/watch.log" 2>"$WORK/watch.err" &
WATCH=$!

step "two ranks (gloo) save torch.distributed.checkpoint, rank r into node r's mount, steps $STEPS"
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((40000 + RANDOM % 20000)) WORLD_SIZE=2
t0=$(date +%s.%N)
RANK=0 "$PY" integration/py/dcp_ranks.py save --dir "$N0" --steps "$STEPS" --scale "$SCALE" --interval 2 &
R0=$!
RANK=1 "$PY" integration/py/dcp_ranks.py save --dir "$N1" --steps "$STEPS" --scale "$SCALE" --interval 2 &
R1=$!
wait $R0 $R1
echo "saved in $(echo "$(date +%s.%N) - $t0" | bc)s"
ls -la "$N0/step-1" "$N1/step-1"

step "the follower: each step loaded, every tensor checked, the moment its .metadata showed"
if ! wait $WATCH; then cat "$WORK/watch.err" >&2; exit 1; fi
cat "$WORK/watch.log"
"$PY" - "$WORK/watch.log" <<'PYEOF'
import json, sys
lags = [json.loads(l)["lag_s"] for l in open(sys.argv[1]) if l.startswith("{")]
print("follower lag, rank 0's close of .metadata to the whole step shown: mean %.2fs, max %.2fs over %d steps" % (sum(lags) / len(lags), max(lags), len(lags)))
PYEOF

step "upload figures, per writer"
for i in 0 1; do
	"$PY" - "$WORK/node$i" "node-$i" <<'PYEOF'
import json, sys, time
mnt, name = sys.argv[1], sys.argv[2]
last = None
for _ in range(1200):
    r = json.load(open(mnt + "/.ckptfs/stats.json"))["remote"]
    if r["pending_versions"] == 0 and r == last:
        break
    last = r
    time.sleep(0.5)
print("%s: uploaded %d bytes for %d logical bytes (%.3f); upload lag, commit to visible root: mean %.3fs, max %.3fs" % (
    name, r["bytes_uploaded"], r["logical_bytes_uploaded"], r["network_ratio"], r["lag_mean_seconds"], r["lag_max_seconds"]))
PYEOF
done
for w in node-0 node-1; do
	echo "bucket: writers/$w holds $(du -sb "$WORK/s3/ckpt/run/writers/$w" | cut -f1) bytes in $(find "$WORK/s3/ckpt/run/writers/$w" -type f | wc -l) objects"
done

step "restore on a fresh machine: a union mount on an empty store, every file read"
# RESTORE_FLAGS: extra mount flags, e.g. --cpuprofile FILE.
"$BIN" mount --store "$WORK/store-restore" --remote "$URL" --endpoint "$EP" --read-only ${RESTORE_FLAGS:-} "$RESTORE"
bytes=$(du -sb --apparent-size "$RESTORE" | cut -f1)
t1=$(date +%s.%N)
find "$RESTORE" -type f -print0 | xargs -0 -P 4 -n 8 cat >/dev/null
t2=$(date +%s.%N)
fetched=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["bytes_fetched"])' "$RESTORE/.ckptfs/stats.json")
for i in 0 1; do
	(cd "$WORK/node$i" && find . -type f -print0 | xargs -0 -I{} cmp {} "$RESTORE/{}") && echo "node-$i's files identical in the restore"
done
"$PY" integration/py/dcp_ranks.py check --dir "$RESTORE" --steps "$STEPS" --scale "$SCALE" >/dev/null && echo "every step loads from the restore (one rank, resharded), every tensor equal"
"$BIN" umount "$RESTORE"
"$BIN" mount --store "$WORK/store-restore" --remote "$URL" --endpoint "$EP" --read-only "$RESTORE"
t3=$(date +%s.%N)
find "$RESTORE" -type f -print0 | xargs -0 -P 4 -n 8 cat >/dev/null
t4=$(date +%s.%N)

step "the same bytes as plain objects, read with plain GETs (8 in flight)"
mkdir -p "$WORK/s3/ckpt/plain"
for i in 0 1; do cp -r "$WORK/node$i/." "$WORK/s3/ckpt/plain/"; done
"$BIN" get-all --endpoint "$EP" s3://ckpt/plain >"$WORK/get.json"
"$PY" - "$bytes" "$(echo "$t2 - $t1" | bc)" "$WORK/get.json" "$fetched" "$(echo "$t4 - $t3" | bc)" <<'PYEOF'
import json, sys
b, s, g, f, warm = int(sys.argv[1]), float(sys.argv[2]), json.load(open(sys.argv[3])), int(sys.argv[4]), float(sys.argv[5])
print("restore through ckptfs: %d bytes in %.2fs = %.0f MB/s (fetch, decode, check)" % (b, s, b / 1e6 / s))
print("plain GETs of the same files: %d bytes in %.2fs = %.0f MB/s" % (g["bytes"], g["seconds"], g["mb_per_second"]))
print("the same restore again, its pieces in the local cache (decode and check only): %.2fs = %.0f MB/s" % (warm, b / 1e6 / warm))
print("restore / plain GETs: %.2f of the throughput, fetching %d bytes (%.0f%% of the files')" % ((b / s) / (g["bytes"] / g["seconds"]), f, 100.0 * f / b))
PYEOF
for d in "$RESTORE" "$FOLLOW" "$N0" "$N1"; do "$BIN" umount "$d"; done
