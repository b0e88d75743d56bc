//go:build !linux

package main

import "time"

// threadCPU falls back to wall time where thread CPU time is not available.
func threadCPU(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}
