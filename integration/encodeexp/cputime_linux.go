//go:build linux

package main

import (
	"runtime"
	"syscall"
	"time"
)

// threadCPU measures f in CPU time of the calling thread (RUSAGE_THREAD),
// so "MB/s per core" stays meaningful on a machine shared with other work.
func threadCPU(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const rusageThread = 1
	var a, b syscall.Rusage
	if syscall.Getrusage(rusageThread, &a) != nil {
		start := time.Now()
		f()
		return time.Since(start)
	}
	f()
	syscall.Getrusage(rusageThread, &b)
	ns := func(r syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
	return time.Duration(ns(b) - ns(a))
}
