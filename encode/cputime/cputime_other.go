//go:build !linux

package cputime

import "time"

// Thread falls back to wall time where thread CPU time is not available.
func Thread(f func()) time.Duration { return wall(f) }
