package fs

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/chain"
)

func TestToErrno(t *testing.T) {
	for _, c := range []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{fmt.Errorf("unlink x: %w", syscall.ENOENT), syscall.ENOENT},
		{fmt.Errorf("rename: %w", syscall.ENOTEMPTY), syscall.ENOTEMPTY},
		{fmt.Errorf("pack: %w", chain.ErrNoSpace), syscall.ENOSPC},
		{fmt.Errorf("version 3 chunk at 0: %w", chain.ErrChecksum), syscall.EIO},
		{errors.New("something unexpected"), syscall.EIO},
	} {
		if got := toErrno(c.err); got != c.want {
			t.Errorf("toErrno(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
