package main

import (
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/fs"
	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
)

// tierFlags are a mount's archive tier (--tier): the policy the daemon
// applies by itself as files leave the exact tier.
type tierFlags struct {
	scheme      string
	moments     string
	exactNewest int
	exactEvery  int
	families    []string
	interval    time.Duration
}

func (t *tierFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&t.scheme, "tier", "", "archive tier applied by the mount itself: round the float32 tensors of files that leave the exact tier to this precision (bf16), in the background, never while a file is open; nothing is lossy without it")
	fl.StringVar(&t.moments, "tier-moments", "", "with --tier: round the optimizer moments of torch.save files (exp_avg, exp_avg_sq, momentum_buffer, ...) to this scheme instead (m4: 4 mantissa bits, relative error 2^-5)")
	fl.IntVar(&t.exactNewest, "tier-exact-newest", 3, "with --tier: the newest files of each family that stay exact (at least 1)")
	fl.IntVar(&t.exactEvery, "tier-exact-every", 0, "with --tier: also keep every M-th file of each family exact (0: none)")
	fl.StringArrayVar(&t.families, "tier-family", nil, "with --tier: tier only the families matching this pattern (as `ckptfs stats` names them; repeatable; default: all)")
	fl.DurationVar(&t.interval, "tier-interval", time.Minute, "with --tier: how often the mount looks for files to tier")
}

// options is the tier the flags state (Lossy zero: none).
func (t *tierFlags) options(fl *pflag.FlagSet) (chain.RepackOptions, error) {
	var o chain.RepackOptions
	if t.scheme == "" {
		for _, name := range []string{"tier-moments", "tier-exact-newest", "tier-exact-every", "tier-family", "tier-interval"} {
			if fl.Changed(name) {
				return o, fmt.Errorf("--%s chooses the tier of --tier: give --tier too", name)
			}
		}
		return o, nil
	}
	lossy, err := encode.LossyByName(t.scheme)
	if err != nil {
		return o, fmt.Errorf("--tier: %w", err)
	}
	var moments encode.Lossy
	if t.moments != "" {
		if moments, err = encode.LossyByName(t.moments); err != nil {
			return o, fmt.Errorf("--tier-moments: %w", err)
		}
	}
	if t.exactNewest < 1 || t.exactEvery < 0 {
		return o, errors.New("--tier-exact-newest must be at least 1 (the newest file is the next save's reference), --tier-exact-every not negative")
	}
	if t.interval <= 0 {
		return o, errors.New("--tier-interval must be positive")
	}
	for _, p := range t.families {
		if _, err := path.Match(p, ""); err != nil {
			return o, fmt.Errorf("--tier-family %q: %w", p, err)
		}
	}
	return chain.RepackOptions{Lossy: lossy, LossyMoments: moments, ExactNewest: t.exactNewest,
		ExactEvery: t.exactEvery, Families: t.families, Online: true}, nil
}

// startTier runs the tier every interval while no save is being written
// or committed (the encoders are the saves'), until stop is called, which
// waits for a pass under way to finish its current part.
func startTier(store *chain.Store, fsys *fs.FS, o chain.RepackOptions, interval time.Duration) (stop func()) {
	var stopped atomic.Bool
	quit := make(chan struct{})
	var wg sync.WaitGroup
	o.Busy = fsys.TierBusy
	o.Stopped = stopped.Load
	var failures passFailures
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			if oldest, writing := fsys.Cut(); oldest != 0 || len(writing) > 0 {
				continue // a save is under way: its encode comes first
			}
			rep, err := store.Repack(o)
			if !failures.report(err) {
				continue
			}
			for _, f := range rep.Families {
				logrus.Infof("tier %s: %d files now %s (%d lossy of %d), %d versions re-coded", f.Name, f.Tiered, rep.Lossy, f.Lossy, f.Files, f.Recoded)
			}
			if len(rep.Families) > 0 {
				logrus.Infof("tier: %d versions re-coded, %d device pages written; the store holds %d bytes", rep.Recoded, rep.PackPagesWritten, rep.StoredAfter)
			}
		}
	}()
	return func() {
		stopped.Store(true)
		close(quit)
		wg.Wait()
	}
}

// passFailures logs the outcome of the tier's passes: a failure as a
// warning the first time it happens, and again only when the error
// changes, since the next pass, a minute later, most likely meets the
// same one (a full device, a damaged file); repeats go to the debug log.
type passFailures struct {
	last   string // the error of the last pass, if it stopped
	inARow int    // passes that stopped since the last that did not
}

// report logs err, the outcome of a pass, and reports whether it was nil.
func (p *passFailures) report(err error) bool {
	if err == nil {
		if p.inARow > 0 {
			logrus.Infof("tier: a pass succeeded after %d that stopped", p.inARow)
		}
		p.last, p.inARow = "", 0
		return true
	}
	p.inARow++
	if msg := err.Error(); msg != p.last {
		logrus.WithError(err).Warn("tier: a pass stopped; the next ones try again (the same error again is logged at debug level)")
		p.last = msg
		return false
	}
	logrus.WithError(err).Debugf("tier: a pass stopped again (%d in a row)", p.inARow)
	return false
}
