package detect

import (
	"bytes"
	"encoding/binary"
)

// sniffLen is how many leading bytes the dispatcher looks at before it picks
// a format. It is fixed (rather than "as soon as the magic matches") so the
// decision depends on the bytes alone, never on how they were split.
const sniffLen = 16

var (
	zipMagic    = []byte("PK\x03\x04")
	npyMagic    = []byte("\x93NUMPY")
	legacyMagic = []byte("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x2e")
)

// dispatcher labels the first sniffLen bytes raw while it collects them, then
// hands over to the machine for the format they show. The machine replays the
// sniffed bytes with the emitter muted, so it starts in the state it would
// have reached had it seen them itself.
type dispatcher struct {
	name   string
	e      emitter
	sniff  [sniffLen]byte
	n      int // bytes sniffed so far
	m      machine
	failed bool // m fell back to generic
	fmt    string
	lay    Layout         // what m declared before it fell back
	force  func() machine // tests: the machine to use whatever the bytes say
}

func newDispatcher(name string) *dispatcher {
	return &dispatcher{name: name}
}

func (d *dispatcher) Label(dst []Span, p []byte) []Span {
	d.e.dst, d.e.start = dst, len(dst)
	if d.m == nil {
		k := copy(d.sniff[d.n:], p)
		d.n += k
		d.e.raw(int64(k))
		p = p[k:]
		if d.n < sniffLen {
			return d.out()
		}
		d.m = d.pick()
		d.fmt = d.m.format()
		d.e.muteEnd, d.e.pos = d.e.pos, 0
		d.feed(d.sniff[:])
	}
	d.feed(p)
	return d.out()
}

func (d *dispatcher) out() []Span {
	dst := d.e.dst
	d.e.dst = nil
	return dst
}

// feed passes p to the current machine and switches to generic labelling for
// whatever it gives up on.
func (d *dispatcher) feed(p []byte) {
	n, failed := d.m.feed(&d.e, p)
	if !failed {
		return
	}
	d.fmt = d.m.format() + "+generic"
	d.lay = d.m.layout()
	d.m, d.failed = generic{}, true
	d.m.feed(&d.e, p[n:])
}

func (d *dispatcher) Format() string {
	if d.m == nil {
		return "unknown"
	}
	if d.failed {
		return d.fmt
	}
	return d.m.format()
}

// pick chooses the machine for a stream starting with d.sniff.
func (d *dispatcher) pick() machine {
	if d.force != nil {
		return d.force()
	}
	b := d.sniff[:]
	switch {
	case bytes.HasPrefix(b, zipMagic):
		return newZipMachine()
	case bytes.HasPrefix(b, npyMagic):
		return newNpyMachine("npy", true)
	case bytes.HasPrefix(b, legacyMagic):
		return newLegacyMachine()
	}
	if kind, ok := caffeHint(d.name); ok && caffePlausible(kind, b) {
		return newCaffeMachine(kind)
	}
	if n := binary.LittleEndian.Uint64(b); b[8] == '{' && n >= 2 && n < 1<<40 {
		return newSafetensorsMachine()
	}
	return generic{}
}

// Layout is what the machine declared; after a fallback, what it had declared
// before.
func (d *dispatcher) Layout() Layout {
	switch {
	case d.m == nil:
		return Layout{}
	case d.failed:
		return d.lay
	}
	return d.m.layout()
}
