package encode

// Lane-wise SUB transform for t = 0 (no dropped bits, the common case):
// 64-bit words holding four 16-bit or two 32-bit elements are transformed
// at once, with the carries kept inside each lane. lanes describes a lane
// width: hi is the top bit of every lane, one the bottom bit.
type lanes struct {
	hi, one, fill uint64 // fill: all bits of one lane
	shift         uint   // lane width - 1
}

var (
	lanes16 = lanes{hi: 0x8000800080008000, one: 0x0001000100010001, fill: 0xFFFF, shift: 15}
	lanes32 = lanes{hi: 0x8000000080000000, one: 0x0000000100000001, fill: 0xFFFFFFFF, shift: 31}
)

// spread turns a word with 0 or 1 in each lane's bottom bit into 0 or all
// ones per lane.
func (l lanes) spread(s uint64) uint64 { return s * l.fill }

func (l lanes) sub(x, y uint64) uint64 { return (x | l.hi - y&^l.hi) ^ (x^^y)&l.hi }
func (l lanes) add(x, y uint64) uint64 { return (x&^l.hi + y&^l.hi) ^ (x^y)&l.hi }

// mono: negative lanes inverted, positive lanes get their sign bit set.
func (l lanes) mono(x uint64) uint64 {
	return x ^ (l.spread(x>>l.shift&l.one) | l.hi)
}

// unmono inverts mono: lanes with the top bit set were positive.
func (l lanes) unmono(m uint64) uint64 {
	return m ^ (^l.spread(m>>l.shift&l.one) | l.hi)
}

func (l lanes) zigzag(d uint64) uint64 {
	return (d<<1)&^l.one ^ l.spread(d>>l.shift&l.one)
}

func (l lanes) unzigzag(z uint64) uint64 {
	return (z>>1)&^l.hi ^ l.spread(z&l.one)
}

// subLanes is zigzag(mono(p) - mono(r)) in every lane.
func (l lanes) subLanes(p, r uint64) uint64 { return l.zigzag(l.sub(l.mono(p), l.mono(r))) }

// unsubLanes inverts subLanes given the same r.
func (l lanes) unsubLanes(z, r uint64) uint64 { return l.unmono(l.add(l.mono(r), l.unzigzag(z))) }

// rotLanes rotates every k-bit lane (kmask: k ones per lane) left by one
// bit, within the lane; unrotLanes rotates right. Baselines are rotated so
// that the exponent, not the sign, heads the top byte plane: the exponent
// plane then has the low entropy the paper's Huffman coding exploits, and
// the sign bit joins the near-random mantissa in plane 0.
func (l lanes) rotLanes(x, kmask uint64, k uint) uint64 {
	return (x<<1)&kmask&^l.one | (x>>(k-1))&l.one
}

func (l lanes) unrotLanes(x, kmask uint64, k uint) uint64 {
	return (x>>1)&(kmask&^(l.one<<(k-1))) | (x&l.one)<<(k-1)
}
