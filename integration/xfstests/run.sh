#!/usr/bin/env bash
# make xfstests: the generic tests of fstests (xfstests) against ckptfs
# mounts, through the mount(8) helper (mount -t fuse.ckptfs), with a
# summary: passed, failed, not run, and each failure either listed in
# expected-failures.txt (with its reason) or unexpected. Exits 1 on any
# unexpected failure, or when a listed failure now passes (so the list
# stays true).
#
# Needs root (mounts, the test users fstests wants, /sbin/mount.fuse.ckptfs)
# and Debian's build dependencies, which it installs when missing. The
# suite is built once from ../shared/xfstests/ into .cache/xfstests.
#
#   XFSTESTS_GROUP  fstests group to run (default quick)
#   XFSTESTS_TESTS  tests to run instead of the group (e.g. "generic/003 generic/448")
#   BIN             the ckptfs binary (default bin/ckptfs)
#   XFSTESTS_REPORT=1  only the summary of the last run's log
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(realpath "${BIN:-$root/bin/ckptfs}")
TARBALL=${XFSTESTS_TARBALL:-$root/../shared/xfstests/xfstests-63a29724.tar.gz}
WORK=${XFSTESTS_DIR:-$root/.cache/xfstests}
GROUP=${XFSTESTS_GROUP:-quick}
EXPECTED=$root/integration/xfstests/expected-failures.txt

src=$WORK/src/xfstests
if [ -z "${XFSTESTS_REPORT:-}" ]; then
if [ "$(id -u)" != 0 ]; then
	echo "make xfstests: needs root (mounts, fstests' users, /sbin/mount.fuse.ckptfs)" >&2
	exit 1
fi
if [ ! -f "$TARBALL" ]; then
	echo "make xfstests: $TARBALL is missing" >&2
	exit 1
fi

deps=(acl attr automake bc gawk gcc libacl1-dev libaio-dev libattr1-dev libcap-dev libgdbm-dev
	libgdbm-compat-dev libtool libtool-bin liburing-dev make psmisc uuid-dev uuid-runtime
	xfslibs-dev xfsprogs e2fsprogs fio fuse3 pkg-config)
missing=()
for p in "${deps[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "== apt-get install ${missing[*]}"
	apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

stamp=$WORK/src/.built-$(sha256sum "$TARBALL" | cut -c1-16)
if [ ! -e "$stamp" ]; then
	echo "== building fstests from $TARBALL (a few minutes, once)"
	rm -rf "$WORK/src"
	mkdir -p "$WORK/src"
	tar xzf "$TARBALL" -C "$WORK/src"
	make -C "$src" -j"$(nproc)" >"$WORK/build.log" 2>&1 || {
		tail -30 "$WORK/build.log"
		exit 1
	}
	touch "$stamp"
fi

# The users and group fstests' permission tests run as.
getent group fsgqa >/dev/null || groupadd fsgqa
id fsgqa >/dev/null 2>&1 || useradd -m -g fsgqa fsgqa
id fsgqa2 >/dev/null 2>&1 || useradd -m fsgqa2
id 123456-fsgqa >/dev/null 2>&1 || useradd -m 123456-fsgqa

# mount -t fuse.ckptfs runs /sbin/mount.fuse.ckptfs: this build's.
helper=/sbin/mount.fuse.ckptfs
old_helper=
if [ -e "$helper" ] || [ -L "$helper" ]; then
	old_helper=$(readlink "$helper" || true)
fi
ln -sfn "$BIN" "$helper"
restore() {
	for m in "$WORK/mnt/test" "$WORK/mnt/scratch"; do
		if grep -q " $m " /proc/mounts; then umount "$m" 2>/dev/null || umount -l "$m" || true; fi
	done
	if [ -n "$old_helper" ]; then ln -sfn "$old_helper" "$helper"; else rm -f "$helper"; fi
}
trap restore EXIT

rm -rf "$WORK/mnt" "$WORK/stores"
mkdir -p "$WORK/mnt/test" "$WORK/mnt/scratch" "$WORK/stores"
chmod 700 "$WORK/stores"
# fstests checks that df's type for the test device is FSTYP (fuse), as
# it does for glusterfs and ceph-fuse; a FUSE mount with a subtype shows
# as fuse.ckptfs, which is what findmnt and ckptfs umount expect.
cat >"$WORK/df" <<'DF'
#!/bin/sh
df "$@" | sed 's/ fuse\.ckptfs / fuse /'
DF
chmod +x "$WORK/df"
cat >"$src/local.config" <<CONF
export TEST_DEV=ckptfs-test
export TEST_DIR=$WORK/mnt/test
export SCRATCH_DEV=ckptfs-scratch
export SCRATCH_MNT=$WORK/mnt/scratch
export FSTYP=fuse
export FUSE_SUBTYP=.ckptfs
export MOUNT_OPTIONS="-ostore=$WORK/stores/scratch,allow_other"
export TEST_FS_MOUNT_OPTS="-ostore=$WORK/stores/test,allow_other"
export DF_PROG="$WORK/df -T -P"
CONF

ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"
args=(-g "$GROUP")
if [ -n "${XFSTESTS_TESTS:-}" ]; then
	read -r -a args <<<"$XFSTESTS_TESTS"
fi
echo "== fstests ${args[*]} against ckptfs ($("$BIN" version)); log in $WORK/check.out"
start=$SECONDS
(cd "$src" && ./check "${args[@]}") >"$WORK/check.out" 2>&1 || true
elapsed=$((SECONDS - start))
echo "$elapsed" >"$WORK/check.seconds"

fi
elapsed=$(cat "$WORK/check.seconds" 2>/dev/null || echo 0)
# The summary: check prints "Ran:", "Not run:" and "Failures:" lines.
field() { sed -n "s/^$1: *//p" "$WORK/check.out" | tail -1 | tr ' ' '\n' | grep -v '^$' | sort -u || true; }
ran=$(field Ran)
notrun=$(field "Not run")
failed=$(field Failures)
if [ -z "$ran" ]; then
	tail -30 "$WORK/check.out"
	echo "make xfstests: check ran no test" >&2
	exit 1
fi
n() { if [ -z "$1" ]; then echo 0; else echo "$1" | wc -l; fi; }
expected=$(grep -v '^#' "$EXPECTED" | awk 'NF {print $1}' | sort -u)
unexpected=$(comm -23 <(echo "$failed" | grep -v '^$' || true) <(echo "$expected"))
# An entry marked (environment) fails on some machines only: its pass is
# no news.
strict=$(grep -v '^#' "$EXPECTED" | grep -v '(environment)' | awk 'NF {print $1}' | sort -u)
fixed=$(comm -12 <(echo "$strict") <(comm -23 <(echo "$ran") <(echo "$failed" | grep -v '^$' || true)))
passed=$(($(n "$ran") - $(n "$failed") - $(n "$notrun"))) # Ran: lists the tests not run too
echo
echo "fstests ${XFSTESTS_TESTS:+$XFSTESTS_TESTS instead of }$GROUP on ckptfs: $passed passed, $(n "$failed") failed, $(n "$notrun") not run ($((elapsed / 60)) min)"
if [ -n "$failed" ]; then
	echo "failed, expected (integration/xfstests/expected-failures.txt):"
	for t in $failed; do
		grep -q "^$t " "$EXPECTED" && grep "^$t " "$EXPECTED" | sed 's/^/  /'
	done
fi
status=0
if [ -n "$unexpected" ]; then
	echo "FAILED, not expected:"
	echo "$unexpected" | sed 's/^/  /'
	echo "(the diffs: $src/results/)"
	status=1
fi
if [ -n "$fixed" ]; then
	echo "listed as expected failures but passed now (remove them from the list):"
	echo "$fixed" | sed 's/^/  /'
	status=1
fi
exit $status
