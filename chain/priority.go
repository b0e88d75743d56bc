package chain

import (
	"runtime"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Encoding a save is work that can wait; the program that saved cannot.
// On a machine whose cores the training keeps busy, the store's encode
// workers would otherwise take cores from it and from the threads that
// serve its next writes. So they run on threads of their own at a lower
// CPU priority (a nice value, as databases run their compactions), and
// take what the training leaves.

// lowerPriority locks the calling goroutine to its thread and lowers that
// thread's priority to s.encodeNice. It returns a function that undoes it
// when the goroutine is done with the thread: the thread's priority is
// restored if the process may raise it again (root); otherwise the
// goroutine stays locked, and the thread ends with the goroutine, so no
// other goroutine ever runs on a lowered thread.
func (s *Store) lowerPriority() (restore func()) {
	if s.encodeNice <= 0 {
		return func() {}
	}
	runtime.LockOSThread()
	tid := unix.Gettid()
	prev, err := threadNice()
	if err != nil {
		// Not lowered: the thread may serve anyone.
		runtime.UnlockOSThread()
		return func() {}
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, prev+s.encodeNice); err != nil {
		logrus.WithError(err).Debug("lower the encoding thread's priority")
		runtime.UnlockOSThread()
		return func() {}
	}
	return func() {
		if unix.Setpriority(unix.PRIO_PROCESS, tid, prev) == nil {
			runtime.UnlockOSThread()
		}
	}
}

// threadNice is the nice value of the calling thread (getpriority(2)
// returns 20 - nice).
func threadNice() (int, error) {
	p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	return 20 - p, err
}
