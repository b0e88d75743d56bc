#!/usr/bin/env bash
# make xfstests: the generic tests of fstests (xfstests) against ckptfs
# mounts, through the mount(8) helper (mount -t fuse.ckptfs), with a
# summary: passed, failed, not run, and each failure either listed in
# expected-failures.txt (with its reason) or unexpected. The tests run
# twice, each time on new stores: in numeric order, then with the stress
# tests (fsstress, fsx) first. Exits 1 on any unexpected failure, when a
# listed failure now passes (so the list stays true), or when a daemon
# logged an error (its log is copied to .cache/xfstests/ckptfs-ORDER-*.log).
#
# Needs root (mounts, the test users fstests wants, /sbin/mount.fuse.ckptfs)
# and Debian's build dependencies, which it installs when missing. The
# suite is built once from ../shared/xfstests/ into .cache/xfstests.
#
#   XFSTESTS_GROUP  fstests group to run (default quick)
#   XFSTESTS_TESTS  tests to run instead of the group (e.g. "generic/003 generic/448")
#   BIN             the ckptfs binary (default bin/ckptfs)
#   XFSTESTS_ORDERS the passes (default "numeric stress-first"; "numeric"
#                   with XFSTESTS_TESTS)
#   XFSTESTS_REPORT=1  only the summary of the last run's logs
#   XFSTESTS_BUILD_ONLY=1  only install and build fstests (make stress)
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
if [ -n "${XFSTESTS_BUILD_ONLY:-}" ]; then
	exit 0
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
unmount_all() {
	for m in "$WORK/mnt/test" "$WORK/mnt/scratch"; do
		if grep -q " $m " /proc/mounts; then umount "$m" 2>/dev/null || umount -l "$m" || true; fi
	done
}
restore() {
	unmount_all
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
# The stores get the paper's 32 GiB device, not one as large as the host
# filesystem has free (a new store's default): the two stores would each
# claim all of it, and a test that fills its filesystem would fill the
# host's.
cat >"$src/local.config" <<CONF
export TEST_DEV=ckptfs-test
export TEST_DIR=$WORK/mnt/test
export SCRATCH_DEV=ckptfs-scratch
export SCRATCH_MNT=$WORK/mnt/scratch
export FSTYP=fuse
export FUSE_SUBTYP=.ckptfs
export MOUNT_OPTIONS="-ostore=$WORK/stores/scratch,allow_other,device-size=paper"
export TEST_FS_MOUNT_OPTS="-ostore=$WORK/stores/test,allow_other,device-size=paper"
export DF_PROG="$WORK/df -T -P"
CONF

ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fi

# The passes: the tests in numeric order, then (unless XFSTESTS_TESTS or
# XFSTESTS_ORDERS says otherwise) the same tests with the stress tests
# (those that run fsstress or fsx) first and the rest after them, as one
# long-lived mount sees them: state a stress test leaves in the daemon
# (its allocator, its caches) then meets every later test.
ORDERS=${XFSTESTS_ORDERS:-numeric stress-first}
if [ -n "${XFSTESTS_TESTS:-}" ]; then
	ORDERS=${XFSTESTS_ORDERS:-numeric}
fi

# tests_of_group lists a group's generic tests in numeric order.
tests_of_group() {
	awk -v g="$1" 'substr($1, 1, 1) != "#" { for (i = 2; i <= NF; i++) if ($i == g) { print "generic/" $1; break } }' \
		"$src/tests/generic/group.list"
}

# stress_first orders tests: those that run fsstress or fsx first.
stress_first() {
	local t stress=() rest=()
	for t in "$@"; do
		if grep -qE 'FSSTRESS_PROG|FSX_PROG|_run_fsstress|run_fsx' "$src/tests/$t" 2>/dev/null; then
			stress+=("$t")
		else
			rest+=("$t")
		fi
	done
	echo "${stress[@]}" "${rest[@]}"
}

run_pass() {
	local order=$1 tests
	if [ -n "${XFSTESTS_TESTS:-}" ]; then
		tests=$XFSTESTS_TESTS
	else
		tests=$(tests_of_group "$GROUP" | tr '\n' ' ')
	fi
	if [ "$order" = stress-first ]; then
		# shellcheck disable=SC2086
		tests=$(stress_first $tests)
	fi
	unmount_all
	rm -rf "$WORK/stores"
	mkdir -p "$WORK/stores"
	chmod 700 "$WORK/stores"
	echo "== fstests ${XFSTESTS_TESTS:-$GROUP} ($order order) against ckptfs ($("$BIN" version)); log in $WORK/check-$order.out"
	local start=$SECONDS
	# shellcheck disable=SC2086
	(cd "$src" && ./check --exact-order $tests) >"$WORK/check-$order.out" 2>&1 || true
	echo $((SECONDS - start)) >"$WORK/check-$order.seconds"
	unmount_all # the daemons write their last lines at unmount
	# The daemons' logs are part of the verdict: keep them beside the output.
	for s in test scratch; do
		cp "$WORK/stores/$s/ckptfs.log" "$WORK/ckptfs-$order-$s.log" 2>/dev/null || : >"$WORK/ckptfs-$order-$s.log"
	done
}

# summarize prints one pass's verdict and returns 1 on an unexpected
# failure, a listed failure that passed, or an error the daemon logged.
summarize() {
	local order=$1 out=$WORK/check-$1.out
	local elapsed
	elapsed=$(cat "$WORK/check-$order.seconds" 2>/dev/null || echo 0)
	# check prints "Ran:", "Not run:" and "Failures:" lines.
	field() { sed -n "s/^$1: *//p" "$out" | tail -1 | tr ' ' '\n' | grep -v '^$' | sort -u || true; }
	local ran notrun failed
	ran=$(field Ran)
	notrun=$(field "Not run")
	failed=$(field Failures)
	if [ -z "$ran" ]; then
		tail -30 "$out"
		echo "make xfstests: check ran no test ($order order)" >&2
		return 1
	fi
	n() { if [ -z "$1" ]; then echo 0; else echo "$1" | wc -l; fi; }
	local expected unexpected strict fixed passed
	expected=$(grep -v '^#' "$EXPECTED" | awk 'NF {print $1}' | sort -u)
	unexpected=$(comm -23 <(echo "$failed" | grep -v '^$' || true) <(echo "$expected"))
	# An entry marked (environment) fails on some machines only: its pass is
	# no news.
	strict=$(grep -v '^#' "$EXPECTED" | grep -v '(environment)' | awk 'NF {print $1}' | sort -u)
	fixed=$(comm -12 <(echo "$strict") <(comm -23 <(echo "$ran") <(echo "$failed" | grep -v '^$' || true)))
	passed=$(($(n "$ran") - $(n "$failed") - $(n "$notrun"))) # Ran: lists the tests not run too
	echo
	echo "fstests ${XFSTESTS_TESTS:+$XFSTESTS_TESTS instead of }$GROUP on ckptfs, $order order: $passed passed, $(n "$failed") failed, $(n "$notrun") not run ($((elapsed / 60)) min)"
	if [ -n "$failed" ]; then
		echo "failed, expected (integration/xfstests/expected-failures.txt):"
		for t in $failed; do
			grep -q "^$t " "$EXPECTED" && grep "^$t " "$EXPECTED" | sed 's/^/  /'
		done
	fi
	local status=0
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
	# An error the daemon logged is a failure, whatever the tests saw:
	# fsstress verifies nothing, and a commit that failed after close
	# loses data no test reads back.
	local s errors
	for s in test scratch; do
		errors=$(grep -E 'level=(error|fatal|panic)|^panic:|^fatal error:' "$WORK/ckptfs-$order-$s.log" || true)
		if [ -n "$errors" ]; then
			echo "DAEMON ERRORS in the $s store's log ($(echo "$errors" | wc -l) lines, $WORK/ckptfs-$order-$s.log):"
			echo "$errors" | cut -c1-300 | head -20 | sed 's/^/  /'
			status=1
		fi
	done
	return $status
}

status=0
for order in $ORDERS; do
	if [ -z "${XFSTESTS_REPORT:-}" ]; then
		run_pass "$order"
	fi
	summarize "$order" || status=1
done
exit $status
