package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/ckptfs/ckptfs/chain/medium"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "64MiB": 64 << 20, "32GiB": 32 << 30, "1.5GB": 1_500_000_000, "2K": 2048} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1MiB", "lots", "0"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) succeeded", bad)
		}
	}
}

func TestDeviceForSize(t *testing.T) {
	cfg, err := deviceForSize("64MiB")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.PhysicalPages() * int64(cfg.PageSize); got != 64<<20 {
		t.Fatalf("64MiB device has %d bytes", got)
	}
	if _, err := deviceForSize("1MiB"); err == nil {
		t.Fatal("a device too small for its spare blocks was accepted")
	}
}

func TestDefaultStoreDir(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/data")
	got, err := defaultStoreDir("/home/u/runs/exp1")
	if err != nil || filepath.Dir(got) != filepath.Join("/data", "ckptfs", "stores") ||
		!strings.HasPrefix(filepath.Base(got), "home%u%runs%exp1-") {
		t.Fatalf("defaultStoreDir = %q, %v", got, err)
	}
	if again, _ := defaultStoreDir("/home/u/runs/exp1/"); again != got {
		t.Fatalf("the same mount point gave %q, then %q", got, again)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/h")
	if got, _ := defaultStoreDir("/mnt"); !strings.HasPrefix(got, "/h/.local/share/ckptfs/stores/") {
		t.Fatalf("without XDG_DATA_HOME: %q", got)
	}
}

// Issue 21 item 4: .../a%b and .../a/b had the same store, and a long mount
// point path made a store name over NAME_MAX.
func TestDefaultStoreDirNoCollision(t *testing.T) {
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	a, _ := defaultStoreDir("/m/a%b")
	b, _ := defaultStoreDir("/m/a/b")
	if a == b {
		t.Fatalf("/m/a%%b and /m/a/b share the store %s", a)
	}
	long := "/" + strings.Repeat("d", 100) + "/" + strings.Repeat("é", 60) + "/" + strings.Repeat("x", 52)
	if len(long) < 275 {
		t.Fatalf("test path of %d bytes", len(long))
	}
	store, err := defaultStoreDir(long)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(store)
	if len(name) > 100 || !utf8.ValidString(name) {
		t.Fatalf("store name %q (%d bytes) for a %d-byte path", name, len(name), len(long))
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	other, _ := defaultStoreDir(long[:len(long)-1] + "y")
	if other == store {
		t.Fatalf("two long paths share the store %s", store)
	}
}

// A store made under the old name (the path with '%' for '/') is still
// found, unless a store of the new name exists or another daemon holds it.
func TestDefaultStoreDirLegacy(t *testing.T) {
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	stores := filepath.Join(data, "ckptfs", "stores")
	legacy := filepath.Join(stores, "home%u%runs%exp1")
	if err := os.MkdirAll(legacy, 0o700); err != nil {
		t.Fatal(err)
	}
	if got, _ := defaultStoreDir("/home/u/runs/exp1"); got != legacy {
		t.Fatalf("legacy store not found: %q", got)
	}
	// Held by the daemon of /home/u/runs%exp1 (same legacy name): not ours.
	f, err := os.Create(filepath.Join(legacy, medium.MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	got, _ := defaultStoreDir("/home/u/runs/exp1")
	if got == legacy {
		t.Fatalf("a legacy store held by another daemon was chosen")
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if err := os.MkdirAll(got, 0o700); err != nil {
		t.Fatal(err)
	}
	if again, _ := defaultStoreDir("/home/u/runs/exp1"); again != got {
		t.Fatalf("with a store of the new name, %q was chosen", again)
	}
}
