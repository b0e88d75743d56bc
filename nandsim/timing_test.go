package nandsim

import (
	"math"
	"testing"
	"time"
)

// writeTime returns the simulated time of n sequential page writes on cfg.
func writeTime(t *testing.T, cfg Config, n int64) time.Duration {
	t.Helper()
	s := mustOpen(t, cfg, Options{})
	defer s.Close()
	m := s.Mark()
	if err := s.Account(0, n); err != nil {
		t.Fatal(err)
	}
	return s.Since(m)
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want) }

func TestChannelsWorkInParallel(t *testing.T) {
	const n = 20000 // no GC: well under the capacity of 32768 pages
	perPage := 0.2 + 4096*0.000025
	one := DefaultConfig()
	one.Channels, one.BlocksPerChip = 1, 512
	eight := DefaultConfig()
	eight.Channels, eight.BlocksPerChip = 8, 64

	t1, t8 := writeTime(t, one, n), writeTime(t, eight, n)
	if want := n * perPage; !within(float64(t1)/1e6, want, 1e-6) {
		t.Errorf("1 channel: %v, want %.1f ms (transfer + program per page)", t1, want)
	}
	if r := float64(t1) / float64(t8); !within(r, 8, 0.01) {
		t.Errorf("8 channels are %.3fx faster than 1, want 8", r)
	}

	// One bus for all transfers (the paper's "only one chip can send data
	// to or receive data from the host at a certain time"): bus-bound at
	// one transfer per page.
	shared := eight
	shared.SharedBus = true
	ts := writeTime(t, shared, n)
	if want := perPage / (4096 * 0.000025); !within(float64(t1)/float64(ts), want, 0.01) {
		t.Errorf("shared bus: %.3fx faster than 1 channel, want %.3f", float64(t1)/float64(ts), want)
	}

	// Chips of one channel overlap their programs but share the bus.
	chips := DefaultConfig()
	chips.Channels, chips.ChipsPerChannel, chips.BlocksPerChip = 1, 8, 64
	if tc := writeTime(t, chips, n); !within(float64(ts), float64(tc), 0.01) {
		t.Errorf("8 chips on one channel took %v, want the shared-bus time %v", tc, ts)
	}
}

// Table 9 of the paper: restoring a 46581-page snapshot took 0.760 s and
// saving it 1.945 s (with the delta computation). With per-channel buses the
// model gives 46581/8 x (0.025 + 0.1024) ms = 0.742 s to read and
// 46581/8 x 0.3024 ms = 1.761 s to write.
func TestTable9Times(t *testing.T) {
	cfg := smallConfig(8, 256)
	s := mustOpen(t, cfg, Options{})
	defer s.Close()
	const pages = 46581
	m := s.Mark()
	if err := s.Account(0, pages); err != nil {
		t.Fatal(err)
	}
	save := s.Since(m).Seconds()
	m = s.Mark()
	buf := make([]byte, 1024*cfg.PageSize)
	for lpn := int64(0); lpn < pages; lpn += 1024 {
		if err := s.ReadPages(lpn, buf[:min(1024, pages-lpn)*int64(cfg.PageSize)]); err != nil {
			t.Fatal(err)
		}
	}
	restore := s.Since(m).Seconds()
	t.Logf("46581 pages: save %.3f s (paper 1.945 s incl. encoding), restore %.3f s (paper 0.760 s)", save, restore)
	if !within(save, math.Ceil(pages/8.0)*0.3024e-3, 1e-6) || !within(restore, math.Ceil(pages/8.0)*0.1274e-3, 1e-6) {
		t.Errorf("save %.4f s, restore %.4f s", save, restore)
	}
}

// Mark is a barrier: a batch's time does not include earlier work still
// pending on other channels, and GC is included.
func TestMarkSinceAndGCTime(t *testing.T) {
	cfg := smallConfig(2, 64)
	cfg.GCReserve, cfg.GCHighWater = 0, 0
	s := mustOpen(t, cfg, Options{})
	if err := s.Account(0, 1); err != nil { // channel 0 only
		t.Fatal(err)
	}
	m := s.Mark()
	if err := s.Account(1, 1); err != nil { // channel 1 only
		t.Fatal(err)
	}
	if got, want := s.Since(m), msToDuration(0.3024); got != want {
		t.Errorf("one page after a barrier took %v, want %v", got, want)
	}
	if err := RunWorkload(s, Workload{Kind: Random, Passes: 2, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	// Every host page, GC copy and erase is charged to one channel...
	work := float64(st.HostPagesWritten)*0.3024 + float64(st.GCPagesCopied)*0.225 + float64(st.Erases)*1.5
	if busy := st.ChannelBusyMs[0] + st.ChannelBusyMs[1]; !within(busy, work, 1e-9) {
		t.Errorf("busy %.3f ms, want %.3f", busy, work)
	}
	// ...and with nothing waiting, the channels run side by side.
	if slowest := max(st.ChannelBusyMs[0], st.ChannelBusyMs[1]); !within(st.ElapsedMs, slowest, 1e-9) {
		t.Errorf("elapsed %.3f ms, want the busiest channel's %.3f", st.ElapsedMs, slowest)
	}
	if st.ElapsedMs > 0.55*work {
		t.Errorf("elapsed %.1f of %.1f ms of work: channels did not overlap", st.ElapsedMs, work)
	}
}
