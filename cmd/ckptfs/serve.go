package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/sirupsen/logrus"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/medium"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/remote"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/chain/storedir"
	"github.com/ckptfs/ckptfs/fs"
)

// A mount serves a store of its own (read-write) or a replica of a bucket
// (--remote --read-only). Both are served by one loop, serveStore, on
// options built in one place (storeOptions, mountOptions): the replica had
// a loop of its own once, and missed settings the other got (it ignored
// --cache-mib, and the automatic --memory-limit that makes room for the
// cache).

// mountedStore is a store opened for a mount, with the file system on it.
type mountedStore struct {
	fsys *fs.FS
	// what follows "mounted MOUNTPOINT" in the log.
	what string
	// sync saves the store's state (--sync-every); nil: nothing to save.
	sync func() error
	// close finishes and closes the store: after the unmount, or when
	// the mount failed.
	close func() error
}

// serve mounts and serves until unmounted or signalled; served says whether
// the mount came up (a store that never served may be removed again).
func serve(mp string, f mountFlags, pol policy.Policy) (served bool, err error) {
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return false, err
		}
		defer stop()
	}
	if f.memProfile != "" {
		defer startMemProfile(f.memProfile)()
	}
	report := readyReporter(f.readyFD)
	var m *mountedStore
	if f.remote.readOnly {
		m, err = openReplicaMount(f, pol)
	} else {
		m, err = openStoreMount(f, pol)
	}
	if errors.Is(err, chain.ErrLocked) {
		err = fmt.Errorf("store %s is in use by another ckptfs daemon", f.store)
		if f.readyFD > 0 {
			// Our stderr is the log of the daemon that holds the store.
			return false, errReported{report(err)}
		}
		return false, err
	}
	if err != nil {
		return false, report(err)
	}
	return serveStore(mp, f, m, report)
}

// startCPUProfile starts --cpuprofile; stop ends it.
func startCPUProfile(path string) (stop func(), err error) {
	pf, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}

// startMemProfile writes a heap profile to path at each SIGUSR1 and when
// stop is called: the heap of a daemon in the middle of a save, on demand.
func startMemProfile(path string) (stop func()) {
	write := func() {
		if err := writeHeapProfile(path); err != nil {
			logrus.WithError(err).Warn("memprofile")
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sig:
				write()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
		write()
	}
}

func writeHeapProfile(path string) error {
	pf, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC() // the profile shows the heap as of the last collection
	if err := pprof.WriteHeapProfile(pf); err != nil {
		pf.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return pf.Close()
}

// readyReporter returns the function that tells the process that started
// the daemon (--ready-fd) whether the mount is up: "ok" or the error, once;
// it returns the error it was given. Without a ready descriptor it only
// returns the error.
func readyReporter(fd int) func(error) error {
	var ready *os.File
	if fd > 0 {
		ready = os.NewFile(uintptr(fd), "ready")
	}
	return func(err error) error {
		if ready != nil {
			if err != nil {
				fmt.Fprintln(ready, err)
			} else {
				fmt.Fprintln(ready, "ok")
			}
			ready.Close()
			ready = nil
		}
		return err
	}
}

// storeOptions are the store's options for a mount, read-write or replica.
// The encoders' priority is the read-write mount's alone (openStoreMount):
// a replica encodes nothing, and its workers decode for its readers, which
// get its whole cache (no save will want a reference tier).
func storeOptions(f mountFlags, pol policy.Policy) chain.Options {
	return chain.Options{Policy: pol, CacheBytes: cacheBytes(f.cacheMiB), ReadsOnly: f.remote.readOnly}
}

// mountOptions are the FUSE options of a mount, read-write or replica.
func mountOptions(f mountFlags) fs.MountOptions {
	return fs.MountOptions{AllowOther: f.allowOther, Debug: f.debug, NoPassthrough: f.noPassthru, ReadOnly: f.remote.readOnly,
		Source: f.source, VFS: f.vfs}
}

// openStoreMount opens the store of a read-write mount, applies the coding
// flags given over the policy it keeps, and starts its uploader if
// --remote is set.
func openStoreMount(f mountFlags, pol policy.Policy) (*mountedStore, error) {
	if err := remote.CheckNotReplica(f.store); err != nil {
		return nil, err
	}
	dev, devSource, err := newStoreDevice(f.deviceSize, f.store)
	if err != nil {
		return nil, err
	}
	o := storeOptions(f, pol)
	o.Workers, o.EncodeNice = chain.EncodeWorkers(f.encodeNice), f.encodeNice
	// The store's own policy first (pol for a new store): the flags given
	// set their settings only, the others keep what the store keeps.
	ds, err := storedir.Open(f.store, storedir.Options{Options: o, Media: medium.Options{Device: dev, DeviceSource: devSource, Precondition: f.precondition}, StoredPolicy: true})
	if err != nil {
		return nil, err
	}
	if given := f.policy.given(); len(given) > 0 {
		if err := ds.OverridePolicy(pol, given); err != nil {
			ds.Close()
			return nil, fmt.Errorf("store %s: %w", f.store, err)
		}
	}
	limitMemoryFor(ds, 0)
	fsys := fs.New(ds.Store.Names(), ds.Store)
	up, err := f.remote.startUploader(ds, fsys.Cut)
	if err != nil {
		ds.Close()
		return nil, err
	}
	fsys.SyncClose = f.syncClose
	fsys.NoReadCopies, fsys.ReadCopyMin = f.noReadCopies, f.readCopyMin
	fsys.Staging = ds.Staging
	if err := fsys.AdoptStaged(ds.Store.TakeWaitingStaged()); err != nil {
		f.remote.stopUploader(up)
		ds.Close()
		return nil, fmt.Errorf("store %s: %w", f.store, err)
	}
	stopTier := func() {}
	if f.tiering.Online {
		stopTier = startTier(ds.Store, fsys, f.tiering, f.tier.interval)
	}
	fsys.Stats = func() ([]byte, error) {
		rep, err := ds.Report(storedir.ReportOptions{})
		if err != nil {
			return nil, err
		}
		rep.Store = f.store
		rep.SaveMode = fsys.Mode()
		rep.SavesWaitingForRoom = fsys.SavesWaitingForRoom()
		rep.SavesRetrying, rep.CommitsFailed = fsys.SavesRetrying(), fsys.CommitsFailed()
		rep.ReadCopies, rep.ReadCopyBytes = fsys.ReadCopies()
		rt := chain.ReadRuntime()
		rep.Runtime = &rt
		return json.MarshalIndent(withRemote(rep, up), "", "  ")
	}
	return &mountedStore{fsys: fsys, what: fmt.Sprintf(" (store %s)", f.store), sync: ds.Sync,
		close: func() error {
			stopTier()
			f.remote.stopUploader(up)
			if err := ds.Close(); err != nil {
				return fmt.Errorf("close store %s: %w", f.store, err)
			}
			return nil
		}}, nil
}

// openReplicaMount opens a bucket's newest checkpoint read-only on an
// empty (or replica) store.
func openReplicaMount(f mountFlags, pol policy.Policy) (*mountedStore, error) {
	b, err := f.remote.open(true, false)
	if err != nil {
		return nil, err
	}
	return replicaMount(f, pol, b)
}

// replicaMount opens the replica of bucket b for a mount.
func replicaMount(f mountFlags, pol policy.Policy, b bucket.Bucket) (*mountedStore, error) {
	rep, err := openReplica(f, pol, b)
	if err != nil {
		return nil, err
	}
	// Its cache follows --cache-mib as the read-write mount's does, and so
	// must the heap limit that leaves room for it.
	limitMemoryTo(rep.Store.MemoryBudget())
	fsys := fs.New(rep.Store.Names(), rep.Store)
	fsys.Stats = func() ([]byte, error) {
		st := rep.Stats()
		return json.MarshalIndent(struct {
			Store    string `json:"store"`
			ReadOnly bool   `json:"read_only"`
			Follow   bool   `json:"follow"`
			remote.ReplicaStats
		}{f.store, true, f.remote.follow, st}, "", "  ")
	}
	stop := func() {}
	if f.remote.follow {
		stop = follow(rep, fsys, f.remote.followInterval)
	}
	return &mountedStore{fsys: fsys, what: fmt.Sprintf(" read-only: %s: %s (store %s)", b, rep.Describe(), f.store),
		close: func() error {
			stop()
			if err := rep.Close(); err != nil {
				return fmt.Errorf("close replica %s: %w", f.store, err)
			}
			return nil
		}}, nil
}

// openReplica rebuilds the replica of bucket b in f.store.
func openReplica(f mountFlags, pol policy.Policy, b bucket.Bucket) (*remote.Replica, error) {
	return remote.OpenReplica(context.Background(), f.store, b, storeOptions(f, pol), f.remote.cutOptions())
}

// follow refreshes rep every interval until stop is called: newer cuts
// of the run show as the writers upload them.
func follow(rep *remote.Replica, fsys *fs.FS, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			changed, err := rep.Refresh(ctx, fsys.InUse)
			switch {
			case err != nil && ctx.Err() == nil:
				if !failing {
					logrus.WithError(err).Warn("follow: reading the bucket failed; showing the last cut until it answers")
				}
				failing = true
			case err == nil:
				if failing {
					logrus.Info("follow: the bucket answers again")
				}
				failing = false
				if changed {
					logrus.Infof("follow: now showing %s", rep.Describe())
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// serveStore mounts m at mp and serves it until unmounted or signalled,
// saving its state every --sync-every meanwhile.
func serveStore(mp string, f mountFlags, m *mountedStore, report func(error) error) (served bool, err error) {
	server, err := fs.Mount(mp, m.fsys, mountOptions(f))
	if err != nil {
		_ = m.close() // the mount's error is the one to report
		return false, report(err)
	}
	logrus.Infof("mounted %s%s", mp, m.what)
	report(nil)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	// Signals stay caught until the store is closed: one during the
	// drain below must not kill the daemon half way.
	defer signal.Stop(sigs)
	var tick <-chan time.Time
	if f.syncEvery > 0 && m.sync != nil {
		t := time.NewTicker(f.syncEvery)
		defer t.Stop()
		tick = t.C
	}
	done := make(chan struct{})
	go handleSignals(mp, server, sigs, tick, m.sync, done)
	server.Wait()
	m.fsys.Drain() // commits of files closed before the unmount
	m.fsys.Shutdown()
	if err := m.fsys.FlushAtimes(); err != nil {
		logrus.WithError(err).Warn("access times of files read since the mount not saved")
	}
	close(done)
	if err := m.close(); err != nil {
		return true, err
	}
	logrus.Infof("unmounted %s", mp)
	return true, nil
}

// handleSignals unmounts mp on SIGINT or SIGTERM and saves the store's
// state at each tick, until done.
func handleSignals(mp string, server *fuse.Server, sigs <-chan os.Signal, tick <-chan time.Time, sync func() error, done <-chan struct{}) {
	for {
		select {
		case s := <-sigs:
			logrus.Infof("%v: unmounting %s", s, mp)
			if err := server.Unmount(); err != nil {
				logrus.WithError(err).Warn("unmount (files still open?); retrying lazily")
				_ = unmount(mp, true)
			}
		case <-tick:
			if err := sync(); err != nil {
				logrus.WithError(err).Warn("periodic device state save")
			}
		case <-done:
			return
		}
	}
}
