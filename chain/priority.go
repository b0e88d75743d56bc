package chain

import (
	"fmt"
	"os"
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

// DefaultEncodeNice is what the encoders are lowered by unless told
// otherwise (Options.EncodeNice, a mount's --encode-nice): the encoding
// yields to a busy training (on 2 cores, torch.save of a 119 MiB
// checkpoint into the mount took a fifth less time with it), and still
// gets a share of the cores (nice 10 weighs about a tenth of nice 0 in
// Linux's scheduler).
const DefaultEncodeNice = 10

// EncodeWorkers readies the process for a store whose encode workers are
// lowered by nice, and returns how many workers to give it
// (Options.Workers): one per core. Lowered, the workers keep their Go
// processors while the kernel runs their threads only when the training
// leaves a core, so they must not hold the processors that the threads
// serving the training's writes need: GOMAXPROCS is doubled, unless the
// user set it. Call it once, before the store is opened.
func EncodeWorkers(nice int) int {
	workers := runtime.GOMAXPROCS(0)
	if nice > 0 && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2 * workers)
	}
	if nice > 0 {
		if err := lowerSessionGroup(nice); err != nil {
			logrus.WithError(err).Debug("lower the daemon's scheduling group")
		}
	}
	return workers
}

// autogroupFile is where Linux keeps the nice value of the calling
// process's session group (sched(7), "The autogroup feature").
const autogroupFile = "/proc/self/autogroup"

// lowerSessionGroup sets the nice value of this process's session group
// (0 when the session began) to nice, when the process leads a session of
// its own (a daemonized mount). With autogroup (the default on most
// distributions), the scheduler shares the CPU between sessions first and
// between their threads second, so a thread's nice value ranks it within
// the daemon only: the daemon's session weighed as much as the whole
// training's. Lowered as a whole, the daemon takes what the training
// leaves, and its threads that serve the training's requests still rank
// above its encoders. A process that does not lead its session
// (--foreground, tests) leaves it alone: it would lower the user's shell.
func lowerSessionGroup(nice int) error {
	if sid, err := unix.Getsid(0); err != nil || sid != os.Getpid() {
		return err
	}
	f, err := os.OpenFile(autogroupFile, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("autogroup: %w", err) // no autogroup in this kernel
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%d", nice); err != nil {
		return fmt.Errorf("autogroup nice %d: %w", nice, err)
	}
	return nil
}

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
