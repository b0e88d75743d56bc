package bufpool

import "testing"

func TestBufPoolReuse(t *testing.T) {
	b := Get(256 << 10)
	if len(b) != 256<<10 || cap(b) != 256<<10 {
		t.Fatalf("Get(256 KiB): len %d cap %d", len(b), cap(b))
	}
	b[0] = 42
	Put(b)
	c := Get(200 << 10) // same class
	if cap(c) != 256<<10 || &c[:1][0] != &b[:1][0] {
		t.Fatal("a large buffer was not reused from the free list")
	}
	Put(make([]byte, 3)) // not a power of two: ignored, no panic
	if s := Get(10); len(s) != 10 {
		t.Fatal("small buffer")
	}
}
