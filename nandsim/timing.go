package nandsim

import "time"

// clocks is the timing model, in simulated milliseconds.
//
// Every die (chip) and every bus has a time at which it is next free. The
// host is assumed to submit requests as fast as the device takes them, so an
// operation starts as soon as the resources it needs are free:
//   - host write: page transfer over the channel bus (PageSize x
//     TransferMsPerByte), then the program on the chip. The chip is busy for
//     both, the bus for the transfer only.
//   - host read: the array read on the chip, then the transfer on the bus.
//   - GC copy: copyback inside the chip (read + program), no bus; erase on
//     the chip. GC runs in the foreground, before the write that needed it.
//
// With one chip per channel (the default) a channel is simply busy for the
// sum of its operations and channels run in parallel. Each channel has its
// own bus unless Config.SharedBus, where one bus carries every transfer.
type clocks struct {
	chipFree []float64 // per die
	busFree  []float64 // per channel, or a single shared bus
	busy     []float64 // per channel: summed duration of its chips' operations
	channels int32
	shared   bool
	xferMs   float64
	readMs   float64
	progMs   float64
	eraseMs  float64
}

func newClocks(cfg Config) clocks {
	buses := cfg.Channels
	if cfg.SharedBus {
		buses = 1
	}
	return clocks{
		chipFree: make([]float64, cfg.Dies()),
		busFree:  make([]float64, buses),
		busy:     make([]float64, cfg.Channels),
		channels: int32(cfg.Channels),
		shared:   cfg.SharedBus,
		xferMs:   float64(cfg.PageSize) * cfg.TransferMsPerByte,
		readMs:   cfg.ReadMs,
		progMs:   cfg.ProgramMs,
		eraseMs:  cfg.EraseMs,
	}
}

func (c *clocks) bus(d int32) int32 {
	if c.shared {
		return 0
	}
	return d % c.channels
}

func (c *clocks) hostWrite(d int32) {
	bus := c.bus(d)
	start := max(c.chipFree[d], c.busFree[bus])
	c.busFree[bus] = start + c.xferMs
	c.chipFree[d] = start + c.xferMs + c.progMs
	c.busy[d%c.channels] += c.xferMs + c.progMs
}

func (c *clocks) hostRead(d int32) {
	bus := c.bus(d)
	ready := c.chipFree[d] + c.readMs
	end := max(ready, c.busFree[bus]) + c.xferMs
	c.busFree[bus] = end
	c.chipFree[d] = end
	c.busy[d%c.channels] += c.readMs + c.xferMs
}

func (c *clocks) gc(d int32, copies int64) {
	t := float64(copies)*(c.readMs+c.progMs) + c.eraseMs
	c.chipFree[d] += t
	c.busy[d%c.channels] += t
}

// now is when the last submitted operation completes.
func (c *clocks) now() float64 {
	t := 0.0
	for _, v := range c.chipFree {
		t = max(t, v)
	}
	for _, v := range c.busFree {
		t = max(t, v)
	}
	return t
}

// barrier makes every resource wait for the slowest: what a host that waits
// for all outstanding requests before starting a batch would see.
func (c *clocks) barrier() float64 {
	t := c.now()
	fill64(c.chipFree, t)
	fill64(c.busFree, t)
	return t
}

// barrierAt sets every resource free at t (a restored device starts idle).
func (c *clocks) barrierAt(t float64) {
	fill64(c.chipFree, t)
	fill64(c.busFree, t)
}

func (c *clocks) reset() {
	fill64(c.chipFree, 0)
	fill64(c.busFree, 0)
	fill64(c.busy, 0)
}

func fill64(s []float64, v float64) {
	for i := range s {
		s[i] = v
	}
}

// TimeMark is a point in simulated time, from SSD.Mark.
type TimeMark struct{ ms float64 }

// Ms is the mark's simulated time in milliseconds since the workload began.
func (m TimeMark) Ms() float64 { return m.ms }

func msToDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// Mark returns the current simulated time for Since. It is a barrier: every
// channel waits for the busiest, as a host that waits for its outstanding
// requests before starting a batch would, so Since measures the batch alone.
func (s *SSD) Mark() TimeMark {
	s.mu.Lock()
	defer s.mu.Unlock()
	return TimeMark{ms: s.f.clock.barrier()}
}

// Since is the simulated time from m until everything submitted since has
// completed, GC included.
func (s *SSD) Since(m TimeMark) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return msToDuration(s.f.clock.now() - m.ms)
}
