package main

import (
	"context"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/remote"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/encode"
)

// parsedMountFlags are the flags of a mount of store given args (coding
// flags only), on a 64 MiB device, and the policy they say.
func parsedMountFlags(t *testing.T, store string, args ...string) (mountFlags, policy.Policy) {
	t.Helper()
	var f mountFlags
	fl := pflag.NewFlagSet("mount", pflag.ContinueOnError)
	f.policy.register(fl)
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	f.store, f.deviceSize = store, "64MiB"
	pol, err := f.policy.policy()
	if err != nil {
		t.Fatal(err)
	}
	return f, pol
}

// TestStoreOptionsBothMounts: the read-write mount and the replica get
// the same store and FUSE options from the flags, the default cache size
// included; the replica's store is told it will only be read.
func TestStoreOptionsBothMounts(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		var f mountFlags
		f.remote.readOnly, f.allowOther, f.noPassthru = readOnly, true, true
		o := storeOptions(f, policy.Default())
		if o.CacheBytes != chain.MountCacheBytes {
			t.Errorf("read-only %v: cache %d bytes without --cache-mib, want the default %d", readOnly, o.CacheBytes, chain.MountCacheBytes)
		}
		if o.ReadsOnly != readOnly {
			t.Errorf("read-only %v: store options say reads only: %v", readOnly, o.ReadsOnly)
		}
		f.cacheMiB = 64
		if got := storeOptions(f, policy.Default()).CacheBytes; got != 64<<20 {
			t.Errorf("read-only %v: cache %d bytes with --cache-mib 64", readOnly, got)
		}
		if o := mountOptions(f); o.ReadOnly != readOnly || !o.AllowOther || !o.NoPassthrough {
			t.Errorf("read-only %v: mount options %+v", readOnly, o)
		}
	}
}

// TestReplicaGetsMountCache: a replica opened as a --read-only mount
// opens it follows --cache-mib and its default, as the read-write mount
// does (it used to get the store's fixed default, 128 MiB, instead).
func TestReplicaGetsMountCache(t *testing.T) {
	b := pushedEmptyStore(t)
	budget := func(cacheMiB int) int64 {
		f := mountFlags{store: t.TempDir(), cacheMiB: cacheMiB}
		f.remote.readOnly = true
		rep, err := openReplica(f, policy.Default(), b)
		if err != nil {
			t.Fatal(err)
		}
		defer rep.Close()
		return rep.Store.MemoryBudget()
	}
	// The budgets differ by the caches alone.
	if got, want := budget(0)-budget(1), int64(chain.MountCacheBytes-1<<20); got != want {
		t.Fatalf("replica without --cache-mib holds %d bytes more than with 1 MiB, want %d (the default)", got, want)
	}
}

// TestReplicaMemoryLimit: the automatic --memory-limit of a replica mount
// makes room for its cache, as a read-write mount's does (the replica
// kept the limit set before any store was open, far under a large
// --cache-mib).
func TestReplicaMemoryLimit(t *testing.T) {
	b := pushedEmptyStore(t)
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	auto := "auto"
	defer func(was *string) { memLimitFlag = was }(memLimitFlag)
	memLimitFlag = &auto
	if err := setMemoryLimit(auto, 0); err != nil {
		t.Fatal(err)
	}
	f := mountFlags{store: t.TempDir(), cacheMiB: 2048}
	f.remote.readOnly = true
	m, err := replicaMount(f, policy.Default(), b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	if limit := debug.SetMemoryLimit(-1); limit < 2048<<20 {
		t.Fatalf("replica mount's heap limit %d bytes, under its cache of 2 GiB", limit)
	}
}

// pushedEmptyStore is a bucket holding a copy of an empty store.
func pushedEmptyStore(t *testing.T) bucket.Bucket {
	t.Helper()
	dir := t.TempDir()
	newSmallStore(t, dir)
	ds, err := openExistingStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := bucket.NewMemory()
	u, err := remote.NewUploader(ds.Store, ds.Dir, b, remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = u.Push(ctx)
	u.Close(0)
	ds.Close()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMountFlagsSetTheirSettingsOnly: a coding flag given to a mount sets
// its setting; the settings whose flags are not given keep the store's.
func TestMountFlagsSetTheirSettingsOnly(t *testing.T) {
	store := t.TempDir()
	mount := func(args ...string) {
		t.Helper()
		f, pol := parsedMountFlags(t, store, args...)
		m, err := openStoreMount(f, pol)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.close(); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() policy.Policy {
		t.Helper()
		ds, err := openExistingStore(store)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		return ds.Policy()
	}
	mount("--codec", "zstd", "--snap-dis", "5")
	want := policy.Default()
	want.Codec, want.SnapDis = encode.Zstd, 5
	if got := stored(); got != want {
		t.Fatalf("new store with --codec zstd --snap-dis 5: %+v, want %+v", got, want)
	}
	mount("--scheme", "chain")
	want.Scheme = policy.ChainScheme
	if got := stored(); got != want {
		t.Fatalf("after --scheme chain: %+v, want %+v (the codec and snap-dis kept)", got, want)
	}
	mount()
	if got := stored(); got != want {
		t.Fatalf("after a mount without coding flags: %+v, want %+v", got, want)
	}
	mount("--codec", policy.Default().Codec.String())
	want.Codec = policy.Default().Codec
	if got := stored(); got != want {
		t.Fatalf("after --codec at its default: %+v, want %+v (a flag given counts, even at its default)", got, want)
	}
}

// TestCodingFlagsUnchanged: the coding flags of mount and replay read as
// they always did (names, types, help, defaults).
func TestCodingFlagsUnchanged(t *testing.T) {
	want := []string{
		`      --codec string      tensor codec: ` + codecList() + ` (default "` + policy.Default().Codec.String() + `")`,
		`      --max-depth int     with --snap-dis auto: most deltas between a version and its baseline (default 3)`,
		`      --scheme string     delta scheme: progressive (against the previous version) or chain (against the baseline) (default "progressive")`,
		`      --snap-dis string   versions per baseline group (1 = all baselines), or auto (default "auto")`,
	}
	var pf policyFlags
	fl := pflag.NewFlagSet("mount", pflag.ContinueOnError)
	pf.register(fl)
	// Settings added since have longer names, so pflag may pad the
	// columns wider: compare the lines with the padding closed up.
	got := map[string]bool{}
	for _, line := range strings.Split(fl.FlagUsages(), "\n") {
		got[strings.Join(strings.Fields(line), " ")] = true
	}
	for _, w := range want {
		if !got[strings.Join(strings.Fields(w), " ")] {
			t.Errorf("coding flags lack the line\n%s\nin:\n%s", w, fl.FlagUsages())
		}
	}
	if got := codingFlagList(); !strings.HasPrefix(got, "--codec, --scheme, --snap-dis, --max-depth") {
		t.Fatalf("mount's help lists the coding flags as %q", got)
	}
}

func codecList() string {
	var names []string
	for _, c := range encode.Codecs() {
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}

// TestPolicyLine: the report's policy line, from a report made here or
// read back from JSON alike.
func TestPolicyLine(t *testing.T) {
	r := &chain.Summary{Codec: "planes", Scheme: "chain", SnapDis: "5"}
	if got := policyLine(r); got != "codec planes, scheme chain, snap-dis 5" {
		t.Fatalf("policy line %q", got)
	}
}

// TestAutoMemoryLimit: --memory-limit auto is what the store holds and a
// quarter more (at least 64 MiB), once: the slack was added twice, which
// put a default mount's limit at 357 MiB where 293 MiB was meant.
func TestAutoMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	auto := "auto"
	defer func(was *string) { memLimitFlag = was }(memLimitFlag)
	memLimitFlag = &auto
	for _, c := range []struct{ need, limit int64 }{
		{0, 224 << 20},         // no store open yet: 160 MiB and 64
		{229 << 20, 293 << 20}, // a default mount on 2 cores
		{1 << 30, 1280 << 20},  // a quarter more
		{100 << 20, 224 << 20}, // at least 160 MiB
		{256 << 20, 320 << 20}, // the slack at least 64 MiB
	} {
		limitMemoryTo(c.need)
		if got := debug.SetMemoryLimit(-1); got != c.limit {
			t.Errorf("need %d MiB: limit %d MiB, want %d MiB", c.need>>20, got>>20, c.limit>>20)
		}
	}
}
