//go:build linux

// Package cputime measures work in CPU time of the calling thread, so that
// "MB/s per core" means something on a machine shared with other work
// (the codec's own tests, the benchmark driver and the codec experiments
// use it).
package cputime

import (
	"runtime"
	"syscall"
	"time"
)

// Thread is f's CPU time on the calling thread (RUSAGE_THREAD); its wall
// time where the kernel does not say.
func Thread(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const rusageThread = 1
	var a, b syscall.Rusage
	if syscall.Getrusage(rusageThread, &a) != nil {
		return wall(f)
	}
	f()
	syscall.Getrusage(rusageThread, &b)
	ns := func(r syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
	return time.Duration(ns(b) - ns(a))
}
