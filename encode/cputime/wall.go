package cputime

import "time"

func wall(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}
