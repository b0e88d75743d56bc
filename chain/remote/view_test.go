package remote

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/chain/remote/bucket"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
)

// readView reads the bf16 view of file name whole.
func readView(t *testing.T, s *chain.Store, name string) []byte {
	t.Helper()
	out, err := tryView(s, name)
	if err != nil {
		t.Fatalf("view of %s: %v", name, err)
	}
	return out
}

func tryView(s *chain.Store, name string) ([]byte, error) {
	n, err := s.Names().Lookup(meta.RootIno, name)
	if err != nil {
		return nil, err
	}
	r, err := s.OpenView(n.Version)
	if err != nil {
		return nil, err
	}
	out := make([]byte, r.Size())
	if _, err := r.ReadAt(out, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return out, nil
}

// TestReplicaViewFetchesHighRecords: the bf16 view of a split16 series,
// read from a replica, fetches each chunk's high records and not its low
// ones: much less than an exact read of the same files fetches. The view
// reads the exact bytes cut, and an exact read after it fetches only the
// pages the view did not, and reads every byte back. A store of the
// default codec has no high records: its view fetches what the exact
// read does.
func TestReplicaViewFetchesHighRecords(t *testing.T) {
	for _, c := range []encode.Codec{encode.Split16, encode.DefaultCodec} {
		t.Run(c.String(), func(t *testing.T) {
			p := policy.Default()
			p.Codec = c
			s, dir := testStorePolicy(t, p)
			files := series(t, s, 6)
			b := bucket.NewMemory()
			push(t, s, dir, b, Options{PieceSize: 512 << 10})

			views := openReplica(t, b)
			for name, data := range files {
				want := bytes.Clone(data)
				encode.TruncateFloat32(want[128:]) // the npy header is 128 bytes
				if got := readView(t, views.Store, name); !bytes.Equal(got, want) {
					t.Fatalf("view of %s differs from the cut exact bytes", name)
				}
			}
			viewFetched := views.Stats().BytesFetched

			exact := openReplica(t, b)
			for name, want := range files {
				if got, err := readFile(exact.Store, name); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("exact %s: %v", name, err)
				}
			}
			exactFetched := exact.Stats().BytesFetched

			for name, want := range files {
				if got, err := readFile(views.Store, name); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("exact %s after its view: %v", name, err)
				}
			}
			bothFetched := views.Stats().BytesFetched
			t.Logf("%s: view fetched %d bytes in %d reads, exact %d in %d; both %d",
				c, viewFetched, views.Stats().Fetches, exactFetched, exact.Stats().Fetches, bothFetched)
			if bothFetched > exactFetched {
				t.Fatalf("view then exact fetched %d bytes, exact alone %d: pages fetched twice", bothFetched, exactFetched)
			}
			ratio := float64(viewFetched) / float64(exactFetched)
			switch {
			case c == encode.Split16 && ratio > 0.4:
				t.Fatalf("split16 view fetched %.3f of what the exact read did: not its high records alone", ratio)
			case c != encode.Split16 && ratio < 0.95:
				t.Fatalf("%s view fetched %.3f of what the exact read did: it cannot skip anything", c, ratio)
			}
		})
	}
}

// TestReplicaViewCorrupt: a damaged byte in the high records of a
// baseline's object fails the view of every file coded against it with a
// checksum error, never wrong bytes.
func TestReplicaViewCorrupt(t *testing.T) {
	p := policy.Default()
	p.Codec = encode.Split16
	s, dir := testStorePolicy(t, p)
	series(t, s, 3)
	b := bucket.NewMemory()
	push(t, s, dir, b, Options{})
	// Past the npy header's chunk, inside the first float chunk's high
	// records (a baseline's are a third of it).
	b.Corrupt(uploadedPieces(t, s, dir, "ckpt-0.npy")[0], 5000)
	r := openReplica(t, b)
	for _, name := range []string{"ckpt-0.npy", "ckpt-1.npy", "ckpt-2.npy"} {
		if _, err := tryView(r.Store, name); !errors.Is(err, chain.ErrChecksum) {
			t.Fatalf("view of %s over a damaged baseline: %v, want a checksum error", name, err)
		}
	}
}
