// Command encodeexp runs the encode package's experiments that need only its
// exported API on the real training series (`make series`), and prints their
// tables:
//
//	go run ./integration/encodeexp --roles            # per tensor role
//	go run ./integration/encodeexp --speed            # planes vs scaled MB/s per core
//	go run ./integration/encodeexp --roles --speed --series DIR
//
// --roles splits the fp32 series by tensor role (weights, Adam's exp_avg and
// exp_avg_sq, SGD's momentum) and codes every tensor in its own 64
// Ki-element chunks, as the store cuts them, against the same tensor of the
// previous checkpoint: planes, scaled, dynrle, and planes without a
// reference as a baseline. It knows the layout integration/py/train_series.py
// writes for its default MLP (256-512-512-512-10): the model's tensors by
// sorted key, then each parameter's optimizer state by sorted key; a file of
// another size is reported and left out.
//
// --speed codes the delta chunks of the adam, sgd and adam-stream series with
// planes and scaled and prints encode and decode MB/s per core (thread CPU
// time, best of --rounds), each chunk's round trip checked.
//
// The experiments that need the package's internals (the transform choice,
// grouping, the zstd trial, context splits, scaled's choice against an
// oracle) are tests of encode that assert their bounds (encode/exp_*_test.go;
// `go test -run Experiment -v ./encode/` prints their figures).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/encode/cputime"
)

// chunkElems is the store's chunk length in elements (64 Ki).
const chunkElems = 64 << 10

func main() {
	defSeries := ".cache/series"
	if d := os.Getenv("CKPTFS_SERIES"); d != "" {
		defSeries = d
	}
	series := flag.String("series", defSeries, "directory of the training series that make series writes ($CKPTFS_SERIES when set)")
	roles := flag.Bool("roles", false, "per tensor role: planes, scaled, dynrle and a planes baseline on tensor-aligned chunks")
	speed := flag.Bool("speed", false, "planes vs scaled encode/decode MB/s per core on the delta chunks")
	rounds := flag.Int("rounds", 3, "--speed: rounds per measurement, the best is kept")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./integration/encodeexp [--series DIR] --roles|--speed ...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 || !*roles && !*speed || *rounds < 1 {
		flag.Usage()
		os.Exit(2)
	}
	var err error
	if *roles {
		err = runRoles(*series)
	}
	if err == nil && *speed {
		err = runSpeed(*series, *rounds)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "encodeexp:", err)
		os.Exit(1)
	}
}

// series is the checkpoints of one training in one dtype, oldest first.
type series struct {
	name  string
	dt    encode.DType
	files [][]byte
}

// loadSeries reads dir/set/ckpt-*.<suffix>.raw, which make series writes.
func loadSeries(dir, set, suffix string, dt encode.DType) (series, error) {
	d := filepath.Join(dir, set)
	if _, err := os.Stat(filepath.Join(d, ".done")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return series{}, fmt.Errorf("no training series in %s (no %s): run make series, or pass --series DIR", d, filepath.Join(d, ".done"))
		}
		return series{}, err
	}
	names, err := filepath.Glob(filepath.Join(d, "ckpt-*."+suffix+".raw"))
	if err != nil {
		return series{}, err
	}
	if len(names) < 2 {
		return series{}, fmt.Errorf("%d %s checkpoints in %s, need at least 2: run make series (after removing %s)", len(names), suffix, d, d)
	}
	sort.Strings(names)
	s := series{name: set + "/" + suffix, dt: dt}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return series{}, err
		}
		s.files = append(s.files, b)
	}
	return s, nil
}

// pair is chunk i of checkpoint k and the same chunk of checkpoint k-1.
type pair struct{ plain, ref []byte }

// deltaPairs cuts every checkpoint after the first into 64 Ki-element
// chunks, each paired with the same chunk of the previous checkpoint.
func (s series) deltaPairs() []pair {
	var out []pair
	cb := chunkElems * s.dt.Width()
	for k := 1; k < len(s.files); k++ {
		cur, prev := s.files[k], s.files[k-1]
		for off := 0; off < len(cur) && off < len(prev); off += cb {
			end := min(off+cb, len(cur), len(prev))
			out = append(out, pair{cur[off:end], prev[off:end]})
		}
	}
	return out
}

// tensor is one tensor of the default MLP's checkpoint: its role and its
// element count.
type tensor struct {
	role string
	n    int
}

// mlpLayout is what integration/py/train_series.py writes for its default
// MLP (256-512-512-512-10), with Adam's state or SGD's momentum.
func mlpLayout(adam bool) []tensor {
	// Layers as (weight, bias) element counts, in parameter order.
	layers := [][2]int{{512 * 256, 512}, {512 * 512, 512}, {512 * 512, 512}, {10 * 512, 10}}
	var ts []tensor
	for _, l := range layers { // model state: "k.bias" sorts before "k.weight"
		ts = append(ts, tensor{"weights", l[1]}, tensor{"weights", l[0]})
	}
	for _, l := range layers { // optimizer state per parameter, weight first
		for _, n := range []int{l[0], l[1]} {
			if adam {
				ts = append(ts, tensor{"exp_avg", n}, tensor{"exp_avg_sq", n}, tensor{"step", 1})
			} else {
				ts = append(ts, tensor{"momentum", n})
			}
		}
	}
	return ts
}

// runRoles prints, per training and tensor role, the coded size over the
// plain size of planes, scaled and dynrle deltas and of planes baselines.
func runRoles(dir string) error {
	cd := encode.NewCoder()
	var dec []byte
	size := func(c encode.Codec, p, r []byte) (int, error) {
		enc, err := cd.Encode(nil, c, encode.Float32, p, r)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", c, err)
		}
		dec, err = cd.Decode(dec[:0], enc, r)
		if err != nil || !bytes.Equal(dec, p) {
			return 0, fmt.Errorf("%s: chunk does not round-trip (%v)", c, err)
		}
		return len(enc), nil
	}
	type acc struct{ plain, planes, scaled, dynrle, base int }
	shown := 0
	for _, set := range []string{"adam", "sgd", "adam-stream"} {
		s, err := loadSeries(dir, set, "fp32", encode.Float32)
		if err != nil {
			return err
		}
		ts := mlpLayout(set != "sgd")
		total := 0
		for _, x := range ts {
			total += 4 * x.n
		}
		if len(s.files[0]) != total {
			fmt.Fprintf(os.Stderr, "encodeexp: %s: %d bytes, not the default MLP's %d: left out\n", set, len(s.files[0]), total)
			continue
		}
		res := map[string]*acc{}
		var order []string
		for k := 1; k < len(s.files); k++ {
			off := 0
			for _, x := range ts {
				a := res[x.role]
				if a == nil {
					a = &acc{}
					res[x.role] = a
					order = append(order, x.role)
				}
				end := off + 4*x.n
				for c := off; c < end; c += 4 * chunkElems {
					ce := min(c+4*chunkElems, end)
					p, r := s.files[k][c:ce], s.files[k-1][c:ce]
					a.plain += len(p)
					for _, m := range []struct {
						c   encode.Codec
						ref []byte
						to  *int
					}{{encode.Planes, r, &a.planes}, {encode.Scaled, r, &a.scaled}, {encode.DynRLE, r, &a.dynrle}, {encode.Planes, nil, &a.base}} {
						n, err := size(m.c, p, m.ref)
						if err != nil {
							return fmt.Errorf("%s checkpoint %d: %w", set, k, err)
						}
						*m.to += n
					}
				}
				off = end
			}
		}
		var sum acc
		for _, role := range order {
			a := res[role]
			f := func(v int) float64 { return float64(v) / float64(a.plain) }
			fmt.Printf("%-12s %-10s planes %.4f  scaled %.4f  dynrle %.4f  planes baseline %.4f\n", set, role, f(a.planes), f(a.scaled), f(a.dynrle), f(a.base))
			sum.plain += a.plain
			sum.planes += a.planes
			sum.scaled += a.scaled
			sum.dynrle += a.dynrle
		}
		fmt.Printf("%-12s %-10s planes %.4f  scaled %.4f  dynrle %.4f  (planes %+.1f%%, scaled %+.1f%%)\n", set, "all", float64(sum.planes)/float64(sum.plain),
			float64(sum.scaled)/float64(sum.plain), float64(sum.dynrle)/float64(sum.plain), 100*(float64(sum.planes)/float64(sum.dynrle)-1),
			100*(float64(sum.scaled)/float64(sum.dynrle)-1))
		shown++
	}
	if shown == 0 {
		return errors.New("--roles: no series has the default MLP's layout (integration/py/train_series.py's defaults)")
	}
	return nil
}

// runSpeed prints planes' and scaled's encode and decode MB/s per core on
// the delta chunks of the fp32 series.
func runSpeed(dir string, rounds int) error {
	for _, set := range []string{"adam", "sgd", "adam-stream"} {
		s, err := loadSeries(dir, set, "fp32", encode.Float32)
		if err != nil {
			return err
		}
		pairs := s.deltaPairs()
		plain := 0
		for _, p := range pairs {
			plain += len(p.plain)
		}
		line := fmt.Sprintf("%s: MB/s per core (thread CPU, best of %d), encode / decode:", s.name, rounds)
		for _, c := range []encode.Codec{encode.Planes, encode.Scaled} {
			cd := encode.NewCoder()
			encs := make([][]byte, len(pairs))
			var out []byte
			for i, p := range pairs {
				if encs[i], err = cd.Encode(nil, c, s.dt, p.plain, p.ref); err != nil {
					return fmt.Errorf("%s %s chunk %d: %w", s.name, c, i, err)
				}
				if out, err = cd.Decode(out[:0], encs[i], p.ref); err != nil || !bytes.Equal(out, p.plain) {
					return fmt.Errorf("%s %s chunk %d does not round-trip (%v)", s.name, c, i, err)
				}
			}
			be, bd := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
			for range rounds {
				be = min(be, cputime.Thread(func() {
					for i, p := range pairs {
						encs[i], _ = cd.Encode(encs[i][:0], c, s.dt, p.plain, p.ref)
					}
				}))
				bd = min(bd, cputime.Thread(func() {
					for i, e := range encs {
						out, _ = cd.Decode(out[:0], e, pairs[i].ref)
					}
				}))
			}
			mbs := func(d time.Duration) float64 { return float64(plain) / max(d, time.Microsecond).Seconds() / 1e6 }
			line += fmt.Sprintf(" %s %.0f / %.0f", c, mbs(be), mbs(bd))
		}
		fmt.Println(line)
	}
	return nil
}
