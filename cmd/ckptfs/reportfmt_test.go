package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/storedir"
)

func TestNaturalCompare(t *testing.T) {
	names := []string{"checkpoint-1280/model.bin", "checkpoint-896/model.bin", "checkpoint-128/model.bin",
		"data/10", "data/9", "data/100", "a", "a07", "a7", "a6", "b"}
	got := sortedNaturally(names, func(s string) string { return s })
	want := []string{"a", "a6", "a7", "a07", "b", "checkpoint-128/model.bin", "checkpoint-896/model.bin",
		"checkpoint-1280/model.bin", "data/9", "data/10", "data/100"}
	if !slices.Equal(got, want) {
		t.Errorf("natural order:\n got %q\nwant %q", got, want)
	}
}

func TestStatsHeadlineAndOrder(t *testing.T) {
	er := 0.5
	r := &storedir.Report{Summary: chain.Summary{WrittenVolumeRatio: 0.734, EraseRatio: &er}}
	r.Device.HostPagesWritten, r.Shadow.HostPagesWritten = 734, 1000
	r.Device.Erases, r.Shadow.Erases = 10, 20
	r.Lifetime.DeviceDays, r.Lifetime.ShadowDays = 200, 100
	r.FileRows = []chain.FileRow{{Path: "run/checkpoint-1280/model.bin"}, {Path: "run/checkpoint-896/model.bin"}}
	var out bytes.Buffer
	printReport(&out, r, true)
	first, _, _ := strings.Cut(out.String(), "\n")
	want := "wrote 26.6% less than a plain filesystem (734 against 1,000 pages); erases 50.0% fewer (10 against 20); device lifetime 200 days against 100"
	if first != want {
		t.Errorf("headline\n got %q\nwant %q", first, want)
	}
	if i, j := strings.Index(out.String(), "checkpoint-896"), strings.Index(out.String(), "checkpoint-1280"); i < 0 || j < 0 || i > j {
		t.Errorf("checkpoint-896 not listed before checkpoint-1280:\n%s", out.String())
	}

	fresh := &storedir.Report{Summary: chain.Summary{WrittenVolumeRatio: 0.9}}
	fresh.Device.HostPagesWritten, fresh.Shadow.HostPagesWritten = 90, 100
	if h := headline(fresh); !strings.HasPrefix(h, "wrote 10.0% less") || !strings.Contains(h, "no erases yet") {
		t.Errorf("fresh device headline: %q", h)
	}
	// Saves seconds apart: both page caches spared files replaced before
	// they wrote them; both figures are shown, dirty pages as written, the
	// every-save figure (a training's saves minutes apart) first.
	quick := &storedir.Report{Summary: chain.Summary{WrittenVolumeRatio: 1.5, WrittenVolumeRatioEveryCommit: 0.75, ShadowDirtyPages: 60, ShadowSparedPages: 100},
		DeviceDirtyPages: 30, DeviceSparedPages: 7}
	quick.Device.HostPagesWritten, quick.Shadow.HostPagesWritten = 120, 40
	if h := headline(quick); !strings.HasPrefix(h, "with every save written, as a training saving minutes apart writes them, 25.0% less than a plain filesystem (157 against 200 pages)") ||
		!strings.Contains(h, "seconds apart, wrote 50.0% more (150 against 100 pages)") || !strings.Contains(h, "spared ckptfs 7 pages and the plain filesystem 100") ||
		!strings.Contains(h, "90 of their pages are still in the page caches") {
		t.Errorf("headline with spared pages: %q", h)
	}
	if h := headline(&storedir.Report{}); h != "nothing written yet" {
		t.Errorf("empty store headline: %q", h)
	}
}

func TestDays(t *testing.T) {
	for d, want := range map[float64]string{0: "-", 0.0123: "0.012", 2.5: "2.5", 310.4: "310"} {
		if got := days(d); got != want {
			t.Errorf("days(%v) = %q, want %q", d, got, want)
		}
	}
}
