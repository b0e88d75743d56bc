package chain

import "testing"

func TestBufPoolReuse(t *testing.T) {
	b := getBuf(256 << 10)
	if len(b) != 256<<10 || cap(b) != 256<<10 {
		t.Fatalf("getBuf(256 KiB): len %d cap %d", len(b), cap(b))
	}
	b[0] = 42
	putBuf(b)
	c := getBuf(200 << 10) // same class
	if cap(c) != 256<<10 || &c[:1][0] != &b[:1][0] {
		t.Fatal("a large buffer was not reused from the free list")
	}
	putBuf(make([]byte, 3)) // not a power of two: ignored, no panic
	if s := getBuf(10); len(s) != 10 {
		t.Fatal("small buffer")
	}
}
