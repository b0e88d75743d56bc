package nandsim

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/sirupsen/logrus"
)

// Options are what Open needs besides the geometry.
type Options struct {
	// Backing keeps page content; the zero value discards it.
	Backing Backing
	// StatePath, if set, is where Sync and Close save the FTL state and
	// where Open restores it from.
	StatePath string
	// CheckInvariants runs CheckInvariants after every GC run and fails the
	// write that triggered it on a violation. Slow: O(device) per GC. Tests.
	CheckInvariants bool
}

// SSD is a simulated NAND SSD: content kept by a Backing, placement and cost
// decided by a page-mapped FTL. All methods are safe for concurrent use.
type SSD struct {
	cfg       Config
	st        store
	statePath string

	// life is held shared by every operation and exclusively by Close, so
	// backing I/O (done outside mu) never meets a closed backing.
	life   sync.RWMutex
	closed bool

	saveMu sync.Mutex // orders state saves: a later Sync never writes older state

	mu         sync.Mutex // guards everything below
	f          *ftl
	hc         *hostCache // nil: every write is programmed at once
	dirty      bool
	restored   bool
	reason     string
	lastErases []uint32 // erase counts at the last invariant check
}

// Open creates a device with cfg, restoring the FTL state from
// opts.StatePath when it is there, intact and of the same geometry.
// Otherwise it starts a fresh FTL (logging a warning when state was lost)
// and maps every page the backing holds, so old data stays readable and
// counts as live; the statistics restart from zero.
func Open(cfg Config, opts Options) (*SSD, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := opts.Backing.open(cfg.PageSize)
	if err != nil {
		return nil, fmt.Errorf("open ssd: %w", err)
	}
	s := &SSD{cfg: cfg, st: st, statePath: opts.StatePath}
	if err := s.restore(opts); err != nil {
		st.close()
		return nil, fmt.Errorf("open ssd: %w", err)
	}
	if opts.CheckInvariants {
		s.f.afterGC = s.checkLocked
		s.lastErases = append([]uint32(nil), s.f.erases...)
	}
	return s, nil
}

func (s *SSD) restore(opts Options) error {
	missing := true
	s.reason = "no state path"
	if opts.StatePath != "" {
		f, err := loadState(opts.StatePath, s.cfg)
		if err == nil {
			s.f, s.restored, s.reason = f, true, "restored from "+opts.StatePath
			n, err := s.catchUp()
			if n > 0 {
				s.dirty = true
				logrus.WithField("pages", n).Info("nandsim: programmed pages written after the state was saved")
			}
			return err
		}
		missing = errors.Is(err, fs.ErrNotExist)
		s.reason = err.Error()
		if missing {
			s.reason = "no state file at " + opts.StatePath
		}
	}
	s.f = newFTL(s.cfg)
	mapped, err := s.f.mapBacking(s.st, int64(s.cfg.PageSize))
	if err != nil {
		return err
	}
	s.dirty = mapped > 0
	log := logrus.WithFields(logrus.Fields{"reason": s.reason, "pages_mapped": mapped})
	if opts.StatePath != "" && (!missing || mapped > 0) {
		// Lost statistics are worth a warning; a first open is not.
		log.Warn("nandsim: no usable FTL state; statistics restart from a fresh FTL, pages found in the backing are mapped as live")
	} else {
		log.Debug("nandsim: starting a fresh FTL")
	}
	return nil
}

// Config is the device's configuration.
func (s *SSD) Config() Config { return s.cfg }

// MemoryBytes estimates the memory the device holds: its per-block state
// twice (the copy a state save encodes) and its page maps, which grow with
// the pages mapped, counted twice for the room to grow and the copy.
func (s *SSD) MemoryBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	const perBlock = 4 + 4 + 8 + 1 + 4 + 4 // valid, erases, stamp, state, list links
	return 2*perBlock*s.cfg.TotalBlocks() + 2*(s.f.l2p.bytes()+s.f.p2l.bytes())
}

// PageSize is the size of one page in bytes.
func (s *SSD) PageSize() int { return s.cfg.PageSize }

// LogicalPages is the number of pages the host may address.
func (s *SSD) LogicalPages() int64 { return s.cfg.LogicalPages() }

// StateRestored says whether Open restored a saved FTL state.
func (s *SSD) StateRestored() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restored
}

// StateReason says where the FTL state came from, or why it was not restored.
func (s *SSD) StateReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// ResetCounters zeroes the workload statistics and the simulated clock but
// keeps the page map and the per-block erase counts (the wear already done).
func (s *SSD) ResetCounters() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.f.resetCounters()
	s.dirty = true
}

// Sync saves the FTL state (when a state path was given and something
// changed) and flushes the backing.
func (s *SSD) Sync() error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	return s.sync()
}

// SyncContent makes the stored page content durable without saving the FTL
// state: what an fsync needs, since a lost state costs statistics only.
func (s *SSD) SyncContent() error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	if err := s.writeBack(false); err != nil { // fsync of the backing writes them
		return fmt.Errorf("sync ssd content: %w", err)
	}
	if err := s.st.sync(); err != nil {
		return fmt.Errorf("sync ssd content: %w", err)
	}
	return nil
}

func (s *SSD) sync() error {
	if err := s.writeBack(false); err != nil {
		return fmt.Errorf("sync ssd: %w", err)
	}
	if err := s.st.sync(); err != nil {
		return fmt.Errorf("sync ssd: %w", err)
	}
	if s.statePath == "" {
		return nil
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	// Encoding the default device takes about half a second; copy the
	// fields it needs (tens of ms) and encode without holding the device.
	snap := s.f.snapshot()
	s.dirty = false
	s.mu.Unlock()
	buf := encodeState(snap)
	if err := writeFileAtomic(s.statePath, buf); err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return fmt.Errorf("sync ssd: save state: %w", err)
	}
	return nil
}

// Close syncs and releases the device. Later calls fail with ErrClosed.
func (s *SSD) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	err := s.sync()
	if cerr := s.st.close(); err == nil && cerr != nil {
		err = fmt.Errorf("close ssd: %w", cerr)
	}
	return err
}
