package nandsim

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"testing"
	"time"
)

// envelope wraps a raw (uncompressed) payload into a well-formed state file
// for cfg, so the fuzzer reaches the payload parser past the checksum.
func envelope(cfg Config, raw []byte) []byte {
	var out bytes.Buffer
	out.WriteString(stateMagic)
	binary.Write(&out, binary.LittleEndian, uint32(stateVersion))
	binary.Write(&out, binary.LittleEndian, cfg.fingerprint())
	zw, _ := flate.NewWriter(&out, flate.BestSpeed)
	zw.Write(raw)
	zw.Close()
	binary.Write(&out, binary.LittleEndian, uint64(out.Len()-headerLen))
	binary.Write(&out, binary.LittleEndian, crc32.Checksum(out.Bytes(), castagnoli))
	return out.Bytes()
}

// rawPayload inflates the payload of a state file.
func rawPayload(t testing.TB, state []byte) []byte {
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(state[headerLen : len(state)-trailerLen])))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// FuzzDecodeState decodes arbitrary bytes as a state file, and as the
// payload of a well-formed one. Decoding must fail cleanly or yield an FTL
// that passes its invariants, keeps working and encodes back to itself.
func FuzzDecodeState(f *testing.F) {
	cfg := tinyConfig()
	for seed := uint64(0); seed < 3; seed++ {
		s := mustOpen(f, cfg, Options{})
		if err := RunWorkload(s, Workload{Kind: HotCold, Passes: float64(seed), Seed: seed}); err != nil {
			f.Fatal(err)
		}
		state := encodeState(s.f)
		f.Add(state)
		raw := rawPayload(f, state)
		f.Add(raw)
		f.Add(raw[:len(raw)/2])
	}
	f.Add([]byte(stateMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, file := range [][]byte{data, envelope(cfg, data)} {
			got, err := decodeState(file, cfg)
			if err != nil {
				if !errors.Is(err, ErrBadState) {
					t.Fatalf("error %v is not ErrBadState", err)
				}
				continue
			}
			if err := got.check(); err != nil {
				t.Fatalf("decoded state fails its invariants: %v", err)
			}
			again, err := decodeState(encodeState(got), cfg)
			if err != nil || !again.l2p.equal(&got.l2p) || again.ctr != got.ctr {
				t.Fatalf("re-encoding a decoded state does not round-trip: %v", err)
			}
			for lpn := int32(0); lpn < got.nLogical; lpn++ {
				if err := got.write(lpn); err != nil {
					t.Fatalf("decoded FTL cannot write page %d: %v", lpn, err)
				}
			}
			if err := got.check(); err != nil {
				t.Fatalf("decoded FTL broke after writes: %v", err)
			}
		}
	})
}

// FuzzOps runs an arbitrary sequence of writes, accounts, trims and reads on
// a tiny device, checking invariants after every GC, content against a
// model, and a state round trip at the end.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(bytes.Repeat([]byte{0, 7, 3}, 200))
	f.Add(bytes.Repeat([]byte{1, 0xff, 0x0f, 2, 3, 5}, 300))
	f.Add(bytes.Repeat([]byte{7, 3, 3, 0, 5, 3, 2, 6, 1, 4, 0, 0, 0, 9, 3, 3, 5, 3}, 100)) // the page cache
	f.Fuzz(runOps)
}

// runOps is FuzzOps' body: ops are (op, lpn, count) byte triples.
func runOps(t *testing.T, ops []byte) {
	// Long inputs add little coverage and, with an invariant check after
	// every GC, make each execution slow; keep the first 3000 ops.
	ops = ops[:min(len(ops), 9000)]
	cfg := tinyConfig()
	if len(ops) > 0 && ops[0]&1 == 1 {
		cfg.Policy = CostBenefit
	}
	s := mustOpen(t, cfg, Options{Backing: MemoryBacking(), CheckInvariants: true})
	defer s.Close()
	// Bit 1 of the first op: writes wait in the host's page cache, written
	// back past 6 pages and at op 4.
	cache := len(ops) > 0 && ops[0]&2 == 2
	if cache {
		s.DeferPrograms(0, 6, time.Now)
	}
	var written, accounted int64 // pages WritePages and Account took
	ps, logical := s.PageSize(), s.LogicalPages()
	model := map[int64][]byte{}
	buf := make([]byte, 4*ps)
	for i := 0; i+2 < len(ops); i += 3 {
		op, lpn, n := ops[i]%5, int64(ops[i+1])%(logical+4), int64(ops[i+2]%4)+1
		fits := lpn+n <= logical
		var err error
		switch op {
		case 0:
			data := make([]byte, 0, n*int64(ps))
			for k := int64(0); k < n; k++ {
				data = append(data, pageOf(ps, lpn+k, byte(i))...)
			}
			if err = s.WritePages(lpn, data); err == nil {
				written += n
				for k := int64(0); k < n; k++ {
					model[lpn+k] = data[k*int64(ps) : (k+1)*int64(ps)]
				}
			}
		case 1:
			if err = s.Account(lpn, n); err == nil { // content unchanged: Account stores none
				accounted += n
			}
		case 2:
			if err = s.Trim(lpn, n); err == nil {
				for k := int64(0); k < n; k++ {
					delete(model, lpn+k)
				}
			}
		case 3:
			if err = s.ReadPages(lpn, buf[:n*int64(ps)]); err == nil {
				for k := int64(0); k < n; k++ {
					want := model[lpn+k]
					if want == nil {
						want = make([]byte, ps)
					}
					if !bytes.Equal(buf[k*int64(ps):(k+1)*int64(ps)], want) {
						t.Fatalf("op %d: page %d reads %x, want %x", i/3, lpn+k, buf[k*int64(ps):(k+1)*int64(ps)], want)
					}
				}
			}
		case 4:
			fits = true
			err = s.ProgramDue()
		}
		if fits && err != nil {
			t.Fatalf("op %d (%d at %d+%d): %v", i/3, op, lpn, n, err)
		}
		if !fits && !errors.Is(err, ErrOutOfSpace) && !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("op %d (%d at %d+%d) past the end: %v", i/3, op, lpn, n, err)
		}
	}
	if cache {
		// Every page written is programmed, still dirty or spared, once.
		// Account (op 1) programs at once; it is counted apart.
		if got := s.Stats().HostPagesWritten - accounted + s.DirtyPages() + s.SparedPages(); got != written {
			t.Fatalf("programmed, dirty and spared pages add to %d, want the %d written", got, written)
		}
		if err := s.ProgramDirty(); err != nil || s.DirtyPages() != 0 {
			t.Fatalf("ProgramDirty: %v, %d pages still dirty", err, s.DirtyPages())
		}
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	got, err := decodeState(encodeState(s.f), cfg)
	if err != nil {
		t.Fatalf("state round trip: %v", err)
	}
	if !got.l2p.equal(&s.f.l2p) || got.ctr != s.f.ctr || !slices.Equal(got.erases, s.f.erases) {
		t.Fatal("state round trip changed the FTL")
	}
}
