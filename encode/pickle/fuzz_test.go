package pickle

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// trace is what a run told its hooks, in order.
type trace struct{ events []string }

func (tr *trace) config(c Config) Config {
	c.Persistent = func(pid Value) Value {
		tr.events = append(tr.events, "pid "+pid.Kind.String()+" "+pid.Text)
		if t := pid.Items(); pid.Kind == Tuple && len(t) >= 3 && t[2].Val.Kind == Str {
			return Value{Kind: Pers, Text: t[2].Val.Text}
		}
		return Value{}
	}
	c.OnTuple = func(t Value) {
		tr.events = append(tr.events, "tuple "+strings.Repeat(".", len(t.Items())))
	}
	c.OnStr = func(s string) { tr.events = append(tr.events, "str "+s) }
	return c
}

// checkBounded checks what a bounded Machine holds against its limits.
func checkBounded(t *testing.T, m *Machine) {
	l := m.cfg.Limits
	held := 0
	for _, v := range m.stack {
		held += len(v.Text)
	}
	if len(m.stack) > l.Stack || len(m.marks) > l.Stack || len(m.memo)+len(m.sparse) > l.Memo ||
		m.memoSz > l.MemoBytes || cap(m.buf) > 2*max(l.Str, l.Line)+64 || held > l.Stack*(2*l.Str+1) {
		t.Fatalf("over its limits: stack %d, marks %d, memo %d+%d entries, %d bytes, buffer %d, stack bytes %d",
			len(m.stack), len(m.marks), len(m.memo), len(m.sparse), m.memoSz, cap(m.buf), held)
	}
	for _, v := range m.stack {
		if len(v.Items()) > l.Tuple {
			t.Fatalf("a kept tuple of %d", len(v.Items()))
		}
		for _, it := range v.Items() {
			if it.Val.Node != nil {
				t.Fatalf("a tuple inside a kept tuple")
			}
		}
	}
}

// FuzzPickle feeds arbitrary bytes to Machines, bounded and in Graph mode,
// whole and in two pieces: they must never panic; a bounded one must stay
// within its limits; where the pickle ends (and whether it is one) must not
// depend on the mode or on the cut, and what the hooks are told, and
// whether the machine broke, must not depend on the cut.
func FuzzPickle(f *testing.F) {
	f.Add([]byte("\x80\x02}q\x00.junk"), 3)
	f.Add([]byte(pk{0x80, 2}.storagePid("FloatStorage", "0", 3).op('.')), 5)
	f.Add([]byte("(Vstorage\np0\nctorch\nDoubleStorage\np1\nV5\nVcpu\nI12\ntQS'x'\n(g0\ng1\nV6\ng2\nL3L\ntQ."), 17)
	files, _ := filepath.Glob(filepath.Join("testdata", "*.pkl"))
	for i, name := range files {
		p, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p, i*131)
	}
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		if cut < 0 {
			cut = -cut
		}
		cut %= len(data) + 1
		type result struct {
			n                   int
			done, dead, broken  bool
			events              []string
			hasResult, salvaged bool
		}
		var first *result
		for _, c := range []Config{{Limits: Bounded}, {Graph: true}} {
			var whole, split trace
			a := New(whole.config(c))
			na := a.Feed(data)
			b := New(split.config(c))
			nb := b.Feed(data[:cut])
			if nb == cut {
				nb += b.Feed(data[cut:])
			}
			if !c.Graph {
				checkBounded(t, a)
				checkBounded(t, b)
			}
			_, ra := a.Result()
			_, rb := b.Result()
			_, sa := a.Salvage()
			_, sb := b.Salvage()
			x := result{na, a.Done(), a.Dead(), a.Broken(), whole.events, ra, sa}
			y := result{nb, b.Done(), b.Dead(), b.Broken(), split.events, rb, sb}
			if x.n != y.n || x.done != y.done || x.dead != y.dead || x.broken != y.broken ||
				!slices.Equal(x.events, y.events) || x.hasResult != y.hasResult || x.salvaged != y.salvaged {
				t.Fatalf("graph=%v: whole %+v; cut at %d: %+v", c.Graph, x, cut, y)
			}
			if first == nil {
				first = &x
			} else if first.n != x.n || first.done != x.done || first.dead != x.dead {
				t.Fatalf("framing differs: bounded %d done=%v dead=%v; graph %d done=%v dead=%v",
					first.n, first.done, first.dead, x.n, x.done, x.dead)
			}
		}
	})
}
