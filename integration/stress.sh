#!/usr/bin/env bash
# make stress: the random-operation tests and fsstress, seed after seed,
# for STRESS_MINUTES (default 60), until one fails. Each round runs
#   - fs.TestRandomOps: 10 seeds per save mode, in process (3 sequences of
#     250 operations at once in one mount, checked against a plain
#     directory, then fsck with the allocators' memory);
#   - integration.TestRandomOpsKill: 3 trials per save mode against the
#     binary, each with two SIGKILLs of the daemon;
#   - fsstress -p 20 -n 2000 into a fresh mount of the binary; the daemon
#     must log no error and fsck --deep must find the store clean.
# It prints the seeds run and the operations per minute, and exits 1 at
# the first failure, with the seed to run again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
minutes=${STRESS_MINUTES:-60}
BIN=$(realpath "${BIN:-bin/ckptfs}")
work=$(mktemp -d /tmp/ckptfs-stress.XXXXXX)
# The tests mount below their temporary directories: under $work, so that
# a run stopped midway leaves no mount behind (a dead FUSE mount hangs
# every df on the machine).
cleanup() {
	awk -v w="$work/" '$3 ~ /^fuse/ && index($2, w) == 1 {print $2}' /proc/mounts | while read -r mp; do
		umount -l "$mp" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"

go test -c -o "$work/fs.test" ./fs
go test -c -o "$work/integration.test" ./integration
XFSTESTS_BUILD_ONLY=1 BIN=$BIN integration/xfstests/run.sh
fsstress=$root/.cache/xfstests/src/xfstests/ltp/fsstress

end=$((SECONDS + minutes * 60))
seed=${STRESS_SEED:-$((RANDOM * 1000))}
rounds=0 ops=0
start=$SECONDS
while [ $SECONDS -lt $end ]; do
	echo "== round $((rounds + 1)), seeds $seed..$((seed + 9)) ($(((end - SECONDS) / 60)) min left)"
	if ! (cd fs && CKPTFS_RANDOPS_SEED=$seed CKPTFS_RANDOPS_SEEDS=10 "$work/fs.test" -test.run '^TestRandomOps$' -test.count=1 >"$work/fs.log" 2>&1); then
		grep -v 'level=' "$work/fs.log" | tail -40
		echo "make stress: fs.TestRandomOps failed (CKPTFS_RANDOPS_SEED=$seed CKPTFS_RANDOPS_SEEDS=10)"
		exit 1
	fi
	ops=$((ops + 2 * 10 * 3 * 250))
	if ! (cd integration && CKPTFS_RANDOPS_SEED=$seed CKPTFS_RANDOPS_SEEDS=3 "$work/integration.test" -test.run '^TestRandomOpsKill$' -test.count=1 >"$work/int.log" 2>&1); then
		grep -v 'level=' "$work/int.log" | tail -40
		echo "make stress: integration.TestRandomOpsKill failed (CKPTFS_RANDOPS_SEED=$seed CKPTFS_RANDOPS_SEEDS=3)"
		exit 1
	fi
	ops=$((ops + 2 * 3 * 300))
	mkdir -p "$work/mnt"
	rm -rf "$work/store"
	"$BIN" mount --store "$work/store" "$work/mnt" >/dev/null
	"$fsstress" -d "$work/mnt/fsstress" -f bulkstat=0 -f bulkstat1=0 -f resvsp=0 -f unresvsp=0 \
		-f attr_set=100 -f attr_remove=100 -p 20 -n 2000 -s "$seed" >"$work/fsstress.log" 2>&1 || true
	"$BIN" umount "$work/mnt"
	ops=$((ops + 20 * 2000))
	if grep -E 'level=(error|fatal)|panic:' "$work/store/ckptfs.log"; then
		echo "make stress: the daemon logged errors under fsstress -p 20 -n 2000 -s $seed"
		exit 1
	fi
	if ! "$BIN" fsck --deep --store "$work/store" >"$work/fsck.log" 2>&1; then
		cat "$work/fsck.log"
		echo "make stress: fsck after fsstress -s $seed"
		exit 1
	fi
	rounds=$((rounds + 1))
	seed=$((seed + 10))
done
elapsed=$((SECONDS - start))
echo "make stress: $rounds rounds in $((elapsed / 60)) min, no failure: $ops operations ($((ops * 60 / (elapsed > 0 ? elapsed : 1))) a minute)"
