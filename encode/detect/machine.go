package detect

// machine is a format state machine. The dispatcher feeds it every byte of
// the stream, in order, in pieces of any size; its decisions depend only on
// the bytes, never on where the pieces are cut.
type machine interface {
	// feed labels p through e. A machine that finds the stream no longer
	// matches its format returns failed with n, the bytes of p it labelled;
	// the dispatcher labels the rest of the stream generically. Otherwise n is
	// len(p).
	feed(e *emitter, p []byte) (n int, failed bool)
	format() string
	// layout is what the stream declared of its tensors so far.
	layout() Layout
}
