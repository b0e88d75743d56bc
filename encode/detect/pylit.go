package detect

import (
	"strconv"
	"strings"
)

// parsePyDict parses the Python dict literal of an .npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }. Values come back
// as string, int64, bool, nil, []any (lists and tuples) or map[string]any.
// It accepts only literals, so a hostile header is just "not parsed".
func parsePyDict(s string) (map[string]any, bool) {
	p := pyParser{s: s}
	v, ok := p.value(0)
	if !ok {
		return nil, false
	}
	p.space()
	d, isDict := v.(map[string]any)
	return d, isDict && p.i == len(p.s)
}

type pyParser struct {
	s string
	i int
}

const pyDepthCap = 32

func (p *pyParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) value(depth int) (any, bool) {
	if depth > pyDepthCap {
		return nil, false
	}
	p.space()
	if p.i >= len(p.s) {
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.dict(depth)
	case c == '(' || c == '[':
		closer := byte(')')
		if c == '[' {
			closer = ']'
		}
		return p.seq(depth, closer)
	case c == '\'' || c == '"':
		return p.str()
	case c == '-' || c == '+' || (c >= '0' && c <= '9'):
		return p.int()
	default:
		return p.name()
	}
}

func (p *pyParser) dict(depth int) (any, bool) {
	p.i++ // {
	d := map[string]any{}
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return d, true
		}
		k, ok := p.value(depth + 1)
		ks, isStr := k.(string)
		if !ok || !isStr {
			return nil, false
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, false
		}
		p.i++
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		d[ks] = v
		if !p.sep('}') {
			return nil, false
		}
	}
}

func (p *pyParser) seq(depth int, closer byte) (any, bool) {
	p.i++ // ( or [
	var l []any
	for {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == closer {
			p.i++
			if l == nil {
				l = []any{}
			}
			return l, true
		}
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		l = append(l, v)
		if !p.sep(closer) {
			return nil, false
		}
	}
}

// sep consumes a comma, or sees (without consuming) the closer.
func (p *pyParser) sep(closer byte) bool {
	p.space()
	if p.i >= len(p.s) {
		return false
	}
	switch p.s[p.i] {
	case ',':
		p.i++
		return true
	case closer:
		return true
	}
	return false
}

// str reads a quoted string without escapes (NumPy never writes any in a
// descr or key).
func (p *pyParser) str() (any, bool) {
	q := p.s[p.i]
	j := strings.IndexByte(p.s[p.i+1:], q)
	if j < 0 {
		return nil, false
	}
	v := p.s[p.i+1 : p.i+1+j]
	if strings.IndexByte(v, '\\') >= 0 {
		return nil, false
	}
	p.i += j + 2
	return v, true
}

func (p *pyParser) int() (any, bool) {
	j := p.i
	if p.s[j] == '-' || p.s[j] == '+' {
		j++
	}
	for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
		j++
	}
	v, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
	if err != nil {
		return nil, false
	}
	if j < len(p.s) && (p.s[j] == 'L' || p.s[j] == 'l') {
		j++ // Python 2 longs
	}
	p.i = j
	return v, true
}

func (p *pyParser) name() (any, bool) {
	for _, n := range []struct {
		s string
		v any
	}{{"True", true}, {"False", false}, {"None", nil}} {
		if strings.HasPrefix(p.s[p.i:], n.s) {
			p.i += len(n.s)
			return n.v, true
		}
	}
	return nil, false
}
