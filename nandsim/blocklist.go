package nandsim

// A blockList is an intrusive doubly linked list of blocks, threaded through
// ftl.prev and ftl.next. A block is on at most one list at a time: its die's
// free list when erased, one valid-count bucket when closed, none when open.
// Lists give O(1) moves between buckets, which keeps victim selection cheap
// on a device of 131072 blocks.
type blockList struct {
	head, tail int32 // -1 when empty
	n          int32
}

func emptyList() blockList { return blockList{head: -1, tail: -1} }

func (f *ftl) pushBack(l *blockList, b int32) {
	f.prev[b] = l.tail
	f.next[b] = -1
	if l.tail >= 0 {
		f.next[l.tail] = b
	} else {
		l.head = b
	}
	l.tail = b
	l.n++
}

func (f *ftl) unlink(l *blockList, b int32) {
	p, n := f.prev[b], f.next[b]
	if p >= 0 {
		f.next[p] = n
	} else {
		l.head = n
	}
	if n >= 0 {
		f.prev[n] = p
	} else {
		l.tail = p
	}
	f.prev[b], f.next[b] = -1, -1
	l.n--
}

// popFront removes and returns the oldest block, or -1.
func (f *ftl) popFront(l *blockList) int32 {
	b := l.head
	if b >= 0 {
		f.unlink(l, b)
	}
	return b
}

// each calls fn for the blocks of l in order.
func (f *ftl) each(l *blockList, fn func(b int32)) {
	for b := l.head; b >= 0; b = f.next[b] {
		fn(b)
	}
}
