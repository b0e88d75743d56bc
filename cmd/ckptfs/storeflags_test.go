package main

import (
	"path/filepath"
	"strings"
	"testing"
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
	if err != nil || got != filepath.Join("/data", "ckptfs", "stores", "home%u%runs%exp1") {
		t.Fatalf("defaultStoreDir = %q, %v", got, err)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/h")
	if got, _ := defaultStoreDir("/mnt"); !strings.HasPrefix(got, "/h/.local/share/ckptfs/stores/") {
		t.Fatalf("without XDG_DATA_HOME: %q", got)
	}
}
