package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/chain/remote"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/chain/storedir"
	"github.com/ckptfs/ckptfs/meta"
)

// remoteFlags are the flags of a mount that replicates to (or reads from)
// an S3 bucket, shared with push and pull.
type remoteFlags struct {
	url       string
	endpoint  string
	pathStyle bool
	readOnly  bool
	drain     time.Duration
	pieceSize string
	interval  time.Duration
	bwlimit   string
	keepRoots int
	keepFor   time.Duration
	uploads   bool // the upload flags are registered
	writer    string
	heartbeat time.Duration
	// A read-only mount's cut and following (docs/REMOTE.md).
	follow         bool
	followInterval time.Duration
	writerTimeout  time.Duration
}

func (r *remoteFlags) registerClient(fl *pflag.FlagSet) {
	fl.StringVar(&r.endpoint, "endpoint", "", "S3 endpoint of a non-AWS server, e.g. http://127.0.0.1:7070 (path-style addressing); credentials come from the AWS environment variables and config files")
	fl.BoolVar(&r.pathStyle, "path-style", false, "path-style addressing on AWS too")
}

func (r *remoteFlags) registerUpload(fl *pflag.FlagSet) {
	r.uploads = true
	fl.StringVar(&r.pieceSize, "remote-piece-size", "32MiB", "most pack bytes per uploaded object")
	fl.MarkHidden("remote-piece-size")
	fl.DurationVar(&r.interval, "remote-interval", 5*time.Second, "how often renames and deletions are looked for when no save wakes the uploader")
	fl.MarkHidden("remote-interval")
	fl.StringVar(&r.bwlimit, "remote-bwlimit", "", "cap the upload rate, in bytes per second (e.g. 50MiB)")
	fl.IntVar(&r.keepRoots, "remote-keep-roots", 2, "newest roots kept in the bucket with everything they need")
	fl.MarkHidden("remote-keep-roots")
	fl.DurationVar(&r.keepFor, "remote-keep-for", 10*time.Minute, "how long the objects of a deleted checkpoint stay in the bucket for readers that have its files open")
	fl.StringVar(&r.writer, "remote-writer", defaultWriter(), "this store's name among the writers of the run (one per node): its objects go under PREFIX/writers/NAME/")
	fl.DurationVar(&r.heartbeat, "remote-heartbeat", time.Second, "how often a busy writer tells readers how far its upload is complete (idle, a minute after its last root: every 5s)")
	fl.MarkHidden("remote-heartbeat")
}

// defaultWriter is the machine's host name, the usual one store per node.
func defaultWriter() string {
	h, err := os.Hostname()
	if err != nil || remote.CheckWriterName(h) != nil {
		return "node"
	}
	return h
}

func (r *remoteFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&r.url, "remote", "", "replicate the store to s3://BUCKET/PREFIX in the background (with --read-only: serve that bucket's newest checkpoint)")
	fl.BoolVar(&r.readOnly, "read-only", false, "with --remote: mount the bucket's content read-only on an empty store, fetching chunks on demand")
	fl.DurationVar(&r.drain, "remote-drain", 30*time.Second, "at unmount, how long to wait for uploads in flight (the rest resumes at the next mount or ckptfs push)")
	fl.BoolVar(&r.follow, "follow", false, "with --read-only: show newer checkpoints as the writers upload them (open files keep their content until closed)")
	fl.DurationVar(&r.followInterval, "follow-interval", time.Second, "with --follow: how often the bucket is looked at")
	fl.DurationVar(&r.writerTimeout, "writer-timeout", 0, "with --read-only: stop waiting for a writer silent this long (0: wait until it mounts again; a killed writer's last files may then show partial)")
	r.registerClient(fl)
	r.registerUpload(fl)
}

// cutOptions are a read-only mount's.
func (r *remoteFlags) cutOptions() remote.CutOptions {
	return remote.CutOptions{WriterTimeout: r.writerTimeout, EmptyOK: r.follow}
}

func (r *remoteFlags) check() error {
	if r.readOnly && r.url == "" {
		return errors.New("--read-only needs --remote: only a replica of a bucket is mounted read-only")
	}
	if r.follow && !r.readOnly {
		return errors.New("--follow needs --read-only: a writable mount shows its own files")
	}
	if r.readOnly && (r.followInterval <= 0 || r.writerTimeout < 0) {
		return errors.New("--follow-interval must be positive, --writer-timeout not negative")
	}
	if r.url != "" {
		if _, err := bucket.ParseURL(r.url); err != nil {
			return err
		}
	}
	if err := remote.CheckWriterName(r.writer); r.uploads && err != nil {
		return fmt.Errorf("--remote-writer: %w", err)
	}
	_, err := r.options()
	return err
}

func (r *remoteFlags) options() (remote.Options, error) {
	o := remote.Options{Interval: r.interval, KeepRoots: r.keepRoots, KeepFor: r.keepFor, Writer: r.writer, Heartbeat: r.heartbeat}
	var err error
	if r.pieceSize != "" {
		if o.PieceSize, err = parseSize(r.pieceSize); err != nil {
			return o, fmt.Errorf("--remote-piece-size: %w", err)
		}
	}
	if r.bwlimit != "" {
		if o.BytesPerSecond, err = parseSize(r.bwlimit); err != nil {
			return o, fmt.Errorf("--remote-bwlimit: %w", err)
		}
	}
	return o, nil
}

// open makes the client and checks that the bucket answers and lets us
// in. Access denied always fails; an unreachable server fails only when
// required (a replica cannot list anything without it). An uploader
// (uploads true) retries every request itself, with back-off and a
// warning on the first failure, so the client makes one attempt.
func (r *remoteFlags) open(required, uploads bool) (*bucket.S3, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := bucket.S3Options{Endpoint: r.endpoint, PathStyle: r.pathStyle}
	if uploads {
		o.MaxAttempts = 1
	}
	b, err := bucket.OpenS3(ctx, r.url, o)
	if err != nil {
		return nil, err
	}
	if err := b.Check(ctx); err != nil {
		if errors.Is(err, bucket.ErrDenied) {
			return nil, fmt.Errorf("%w (check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or the profile, and the bucket's policy)", err)
		}
		if required {
			return nil, err
		}
		logrus.Warnf("%v: uploads will retry until it answers", err)
	}
	return b, nil
}

// startUploader starts replicating ds if --remote is set (nil otherwise).
func (r *remoteFlags) startUploader(ds *storedir.Dir, cut func() (int64, []meta.Ino)) (*remote.Uploader, error) {
	if r.url == "" {
		return nil, nil
	}
	b, err := r.open(false, true)
	if err != nil {
		return nil, err
	}
	o, err := r.options()
	if err != nil {
		return nil, err
	}
	o.Cut = cut
	u, err := remote.NewUploader(ds.Store, ds.Dir, b, o)
	if err != nil {
		return nil, err
	}
	u.Start()
	logrus.Infof("replicating to %s as writer %s", b, o.Writer)
	return u, nil
}

// stopUploader waits for uploads in flight up to --remote-drain.
func (r *remoteFlags) stopUploader(u *remote.Uploader) {
	if u == nil {
		return
	}
	if err := u.Close(r.drain); err != nil {
		logrus.WithError(err).Warn("close remote state")
	}
}

// withRemote adds the uploader's figures to a stats report, under "remote".
func withRemote(rep *storedir.Report, u *remote.Uploader) any {
	if u == nil {
		return rep
	}
	st := u.Stats()
	return withRemoteStats(rep, &st)
}

func withRemoteStats(rep *storedir.Report, st *remote.Stats) any {
	if st == nil {
		return rep
	}
	return struct {
		*storedir.Report
		Remote *remote.Stats `json:"remote"`
	}{rep, st}
}

// printReplica is ckptfs stats of a read-only mount of a run.
func printReplica(out io.Writer, st *remote.ReplicaStats) {
	fmt.Fprintf(out, "Read-only mount of %s", st.Remote)
	if st.Cut != 0 {
		fmt.Fprintf(out, ", cut at %s", time.Unix(0, st.Cut).UTC().Format(time.RFC3339Nano))
	}
	fmt.Fprintf(out, " (%d refreshes changed the tree)\n", st.Refreshes)
	for _, w := range st.Writers {
		name := w.Name
		if name == "" {
			name = "(the prefix's own store)"
		}
		fmt.Fprintf(out, "  writer %s: root %d, %d versions", name, w.RootSeq, w.Versions)
		if w.Watermark != 0 {
			fmt.Fprintf(out, ", complete to %s", time.Unix(0, w.Watermark).UTC().Format(time.RFC3339Nano))
		} else {
			fmt.Fprint(out, ", holds no cut back")
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "  fetched %s bytes in %d ranged reads since mounted\n", thousands(st.BytesFetched), st.Fetches)
}

// printRemote is the remote paragraph of ckptfs stats.
func printRemote(out io.Writer, st *remote.Stats) {
	fmt.Fprintf(out, "\nRemote %s: root %d, %d versions uploaded, %d pending\n", st.Remote, st.RootSeq, st.VersionsUploaded, st.PendingVersions)
	fmt.Fprintf(out, "  uploaded %s bytes for %s logical bytes (%.3f)\n", thousands(st.BytesUploaded), thousands(st.LogicalBytesUploaded), st.NetworkRatio)
	fmt.Fprintf(out, "  upload lag (commit to visible): mean %.2fs", st.LagMeanSeconds)
	if st.LagMaxSeconds > 0 {
		fmt.Fprintf(out, ", max %.2fs, last %.2fs", st.LagMaxSeconds, st.LagLastSeconds)
	}
	fmt.Fprintln(out)
	if st.LastError != "" {
		fmt.Fprintf(out, "  last error (%d retries): %s\n", st.Retries, st.LastError)
	}
}
