package remote

import (
	"context"
	"errors"
	"time"

	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/sirupsen/logrus"
)

// retry calls fn until it succeeds or ctx ends, backing off from 200 ms to
// 15 s between attempts. The first failure, and every tenth, is logged as
// a warning; success after failures is logged too.
func (u *Uploader) retry(ctx context.Context, what string, fn func() error) error {
	delay := 200 * time.Millisecond
	for failures := 0; ; failures++ {
		err := fn()
		var perm permanent
		if errors.As(err, &perm) {
			return perm.error
		}
		if err == nil {
			if failures > 0 {
				logrus.Warnf("remote %s: %s succeeded after %d failed attempts", u.bucket, what, failures)
				u.setErr(nil)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		u.setErr(err)
		u.mu.Lock()
		u.retries++
		u.mu.Unlock()
		if failures%10 == 0 {
			hint := ""
			if errors.Is(err, bucket.ErrDenied) {
				hint = " (access denied: check the credentials and the bucket policy)"
			}
			logrus.Warnf("remote %s: %s failed%s, retrying with back-off (now %v): %v", u.bucket, what, hint, delay, err)
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay = min(2*delay, 15*time.Second)
	}
}

func (u *Uploader) setErr(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil {
		u.lastErr = ""
	} else {
		u.lastErr = err.Error()
	}
}

// permanent is an error retry gives up on at once.
type permanent struct{ error }
