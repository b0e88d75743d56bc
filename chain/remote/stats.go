package remote

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Stats is what the uploader reports (under "remote" in stats.json).
type Stats struct {
	Remote           string `json:"remote"`
	RootSeq          int64  `json:"root_seq"`
	VersionsUploaded int64  `json:"versions_uploaded"`
	PendingVersions  int    `json:"pending_versions"`
	// BytesUploaded is every object byte sent (pieces, manifests, roots);
	// LogicalBytesUploaded the file bytes of the versions uploaded.
	BytesUploaded        int64   `json:"bytes_uploaded"`
	LogicalBytesUploaded int64   `json:"logical_bytes_uploaded"`
	NetworkRatio         float64 `json:"network_ratio"`
	// Upload lag: from a version's commit to the root that makes it
	// visible in the bucket (versions committed while this daemon ran).
	LagLastSeconds float64 `json:"lag_last_seconds"`
	LagMaxSeconds  float64 `json:"lag_max_seconds"`
	LagMeanSeconds float64 `json:"lag_mean_seconds"`
	Retries        int64   `json:"retries"`
	LastError      string  `json:"last_error,omitempty"`
}

// Stats reports the uploader's progress; the counters persist across
// restarts, the lags are this daemon's.
func (u *Uploader) Stats() Stats {
	s := Stats{Remote: u.bucket.String(), RootSeq: u.st.getInt("root_seq"),
		VersionsUploaded: u.st.getInt("versions_uploaded"), BytesUploaded: u.st.getInt("bytes_uploaded"),
		LogicalBytesUploaded: u.st.getInt("logical_bytes_uploaded")}
	if s.LogicalBytesUploaded > 0 {
		s.NetworkRatio = float64(s.BytesUploaded) / float64(s.LogicalBytesUploaded)
	}
	if n := u.st.getInt("lag_count"); n > 0 {
		s.LagMeanSeconds = time.Duration(u.st.getInt("lag_sum_ns") / n).Seconds()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	s.PendingVersions, s.LastError, s.Retries = u.pending, u.lastErr, u.retries
	s.LagLastSeconds, s.LagMaxSeconds = u.lagLast.Seconds(), u.lagMax.Seconds()
	return s
}

// throttle caps the rate r is read at to BytesPerSecond (none if 0).
func (u *Uploader) throttle(ctx context.Context, r io.ReadSeeker) io.ReadSeeker {
	if u.o.BytesPerSecond <= 0 {
		return r
	}
	return &slowReader{ctx: ctx, r: r, rate: u.o.BytesPerSecond}
}

type slowReader struct {
	ctx   context.Context
	r     io.ReadSeeker
	rate  int64
	start time.Time
	n     int64
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.start.IsZero() {
		s.start = time.Now()
	}
	p = p[:min(len(p), 64<<10)]
	due := s.start.Add(time.Duration(float64(s.n) / float64(s.rate) * float64(time.Second)))
	select {
	case <-time.After(time.Until(due)):
	case <-s.ctx.Done():
		return 0, s.ctx.Err()
	}
	n, err := s.r.Read(p)
	s.n += int64(n)
	return n, err
}

func (s *slowReader) Seek(off int64, whence int) (int64, error) {
	s.start, s.n = time.Time{}, 0
	return s.r.Seek(off, whence)
}

// StoredStats reads the uploader's counters from an unmounted store
// directory (nil, nil if it never replicated).
func StoredStats(dir string) (*Stats, error) {
	path := filepath.Join(dir, StateFile)
	if _, err := os.Stat(path); err != nil {
		return nil, nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("remote state %s: %w", path, err)
	}
	defer db.Close()
	st := &state{db: db}
	s := &Stats{Remote: string(st.get("remote")), RootSeq: st.getInt("root_seq"),
		VersionsUploaded: st.getInt("versions_uploaded"), BytesUploaded: st.getInt("bytes_uploaded"),
		LogicalBytesUploaded: st.getInt("logical_bytes_uploaded")}
	if s.LogicalBytesUploaded > 0 {
		s.NetworkRatio = float64(s.BytesUploaded) / float64(s.LogicalBytesUploaded)
	}
	if n := st.getInt("lag_count"); n > 0 {
		s.LagMeanSeconds = time.Duration(st.getInt("lag_sum_ns") / n).Seconds()
	}
	return s, nil
}
