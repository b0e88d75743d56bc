package cputime

import (
	"testing"
	"time"
)

// TestThreadCountsWorkNotSleep: spinning costs CPU time, sleeping costs
// next to none (on Linux, where thread CPU time is measured).
func TestThreadCountsWorkNotSleep(t *testing.T) {
	spin := Thread(func() {
		for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
		}
	})
	if spin < 10*time.Millisecond {
		t.Errorf("50 ms of spinning measured %v", spin)
	}
	sleep := Thread(func() { time.Sleep(50 * time.Millisecond) })
	if sleep > 40*time.Millisecond && !wallOnly {
		t.Errorf("50 ms of sleep measured %v of CPU", sleep)
	}
}
