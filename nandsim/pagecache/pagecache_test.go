package pagecache

import (
	"testing"
	"time"
)

// clock is a settable time for the model.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest(limit int64) (*Cache[string], *clock) {
	c := &clock{t: time.Unix(1000, 0)}
	return New[string](30*time.Second, limit, c.now), c
}

func TestDirtyCountsPagesOnce(t *testing.T) {
	m, _ := newTest(100)
	m.Dirty("a", Run{Start: 0, Len: 10})
	m.Dirty("a", Run{Start: 5, Len: 10}) // 5 pages again
	m.Dirty("b", Run{Start: 0, Len: 10}) // another file's pages
	if m.Pages() != 25 || m.Spared() != 5 {
		t.Fatalf("pages %d spared %d, want 25 and 5", m.Pages(), m.Spared())
	}
	m.Clean("a", Run{Start: 0, Len: 3}) // freed while dirty
	if m.Pages() != 22 || m.Spared() != 8 {
		t.Fatalf("after clean: pages %d spared %d, want 22 and 8", m.Pages(), m.Spared())
	}
	if got := m.Take("a"); len(got) != 1 || got[0] != (Run{Start: 3, Len: 12}) {
		t.Fatalf("Take(a) = %v, want [{3 12}]", got)
	}
	if m.Pages() != 10 || m.Take("a") != nil {
		t.Fatalf("after take: pages %d, a still dirty", m.Pages())
	}
}

func TestExpiryCountsFromTheFirstDirtyPage(t *testing.T) {
	m, c := newTest(100)
	m.Dirty("old", Run{Len: 1})
	c.t = c.t.Add(20 * time.Second)
	m.Dirty("old", Run{Start: 1, Len: 1}) // does not move its age
	m.Dirty("new", Run{Len: 1})
	m.DirtySince("staged", Run{Len: 1}, c.t.Add(-25*time.Second))
	c.t = c.t.Add(10 * time.Second)
	if !m.Due("old") || m.Due("new") || !m.Due("staged") || m.Due("none") {
		t.Fatalf("due: old %v new %v staged %v", m.Due("old"), m.Due("new"), m.Due("staged"))
	}
	due := m.TakeDue()
	if len(due) != 2 || m.Pages() != 1 {
		t.Fatalf("TakeDue wrote back %v, %d pages left; want old and staged, 1 left", due, m.Pages())
	}
	// A file cleaned entirely starts a new period at its next page.
	m.Clean("new", Run{Len: 1})
	c.t = c.t.Add(time.Minute)
	m.Dirty("new", Run{Len: 1})
	if m.Due("new") {
		t.Fatal("a page dirtied now is due")
	}
	m.Renew("new")
	c.t = c.t.Add(30 * time.Second)
	if !m.Due("new") {
		t.Fatal("not due 30 s after its period started")
	}
}

func TestLimitWritesBackOldestFirst(t *testing.T) {
	m, c := newTest(10)
	for _, f := range []string{"a", "b", "c"} {
		if over := m.Dirty(f, Run{Len: 4}); over != (f == "c") {
			t.Fatalf("Dirty(%s) over = %v", f, over)
		}
		c.t = c.t.Add(time.Second)
	}
	k, pages, ok := m.TakeOldest()
	if !ok || k != "a" || len(pages) != 1 || pages[0].Len != 4 {
		t.Fatalf("TakeOldest = %q %v %v, want a's 4 pages", k, pages, ok)
	}
	if _, _, ok := m.TakeOldest(); ok {
		t.Fatal("wrote back under the limit")
	}
}

func TestTakeFirstBatches(t *testing.T) {
	m, _ := newTest(100)
	m.Dirty("dev", Run{Start: 10, Len: 5})
	m.Dirty("dev", Run{Start: 20, Len: 5})
	var got []Run
	for {
		e, ok := m.TakeFirst("dev", 3)
		if !ok {
			break
		}
		got = append(got, e)
	}
	want := []Run{{Start: 10, Len: 3}, {Start: 13, Len: 2}, {Start: 20, Len: 3}, {Start: 23, Len: 2}}
	if len(got) != len(want) || m.Pages() != 0 {
		t.Fatalf("batches %v, %d pages left; want %v", got, m.Pages(), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("batches %v, want %v", got, want)
		}
	}
}

func TestForgetSparesDirtyPages(t *testing.T) {
	m, _ := newTest(100)
	m.Dirty("tmp", Run{Len: 8})
	m.Forget("tmp")
	m.Forget("tmp")
	if m.Pages() != 0 || m.Spared() != 8 || len(m.TakeAll()) != 0 {
		t.Fatalf("after forget: pages %d spared %d", m.Pages(), m.Spared())
	}
}
