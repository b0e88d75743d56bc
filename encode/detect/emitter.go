package detect

// emitter turns the labels a format machine assigns into spans. It owns the
// stream offset and the current region, so machines only say "the next n bytes
// are this label" and, at a tensor's first byte, that a new region starts.
//
// Raw bytes following raw bytes always continue the same region, whatever
// machine produced them: raw runs are maximal, which makes the merged ranges
// independent of where machines hand over to each other.
type emitter struct {
	dst   []Span
	start int // len(dst) when the current Label call began; spans before it are the caller's

	pos    int64 // stream offset of the next byte to label
	cur    Label
	region int64
	begun  bool // whether cur/region describe a region at all (false before the first byte)

	// muteEnd > pos means the bytes up to muteEnd were already labelled (by
	// the dispatcher while sniffing) and a machine replaying them must not
	// label them again.
	muteEnd int64
}

// emit labels the next n bytes with l. fresh starts a new region even if l
// equals the current label (a tensor following a tensor with the same key).
func (e *emitter) emit(l Label, n int64, fresh bool) {
	if n <= 0 {
		return
	}
	if e.pos < e.muteEnd {
		skip := min(n, e.muteEnd-e.pos)
		e.pos += skip
		n -= skip
		if n == 0 {
			return
		}
		// The muted bytes were labelled raw; what follows them is judged
		// against that, so a region the machine began inside the muted
		// prefix starts afresh here.
		fresh = fresh || l.Kind != Raw
	}
	if !e.begun || l != e.cur || (fresh && l.Kind != Raw) {
		e.cur, e.region, e.begun = l, e.pos, true
	}
	if k := len(e.dst); k > e.start {
		last := &e.dst[k-1]
		if last.Label == l && last.Region == e.region && last.End() == e.pos {
			last.Length += n
			e.pos += n
			return
		}
	}
	e.dst = append(e.dst, Span{Label: l, Offset: e.pos, Length: n, Region: e.region})
	e.pos += n
}

func (e *emitter) raw(n int64) { e.emit(rawLabel, n, false) }
