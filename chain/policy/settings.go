package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ckptfs/ckptfs/encode"
)

// Setting is one setting of a Policy as everything outside the store's
// logic sees it: a flag of mount and replay, a key of the record a store
// keeps its policy in, and maybe a line of the report. The table below is
// the one list of them, so that adding a setting is a field of Policy, its
// line in the table and the code that uses it: the flags, the record, the
// "flag given or the store's value" rule and the report follow the table.
type Setting struct {
	// Key names the setting in the store's policy record and in JSON
	// reports (snap_dis). Never rename it: stores keep it.
	Key string
	// Flag is the setting's flag, without dashes (snap-dis).
	Flag string
	// Usage is the flag's help text.
	Usage string
	// Number says the value is an integer: an int flag, and a JSON number
	// in the record. The others are strings in both.
	Number bool
	// Reported says the report's summary shows the setting: chain.Summary
	// has a field with JSON key Key (a test holds them together).
	Reported bool
	// Parse sets the setting in p from its text: a flag's value, or the
	// record's.
	Parse func(p *Policy, text string) error
	// Format is the setting's text in p, the inverse of Parse.
	Format func(p Policy) string
}

// Default is the setting's text in Default(): the flag's default, and the
// value a store's record made before the setting existed stands for.
func (s Setting) Default() string { return s.Format(Default()) }

// settings is the table, in the order of the record's keys (which stores
// keep: append, never reorder).
var settings = []Setting{
	{
		Key: "codec", Flag: "codec", Usage: "tensor codec: " + codecNames(), Reported: true,
		Parse:  parsed(encode.ParseCodec, func(p *Policy) *encode.Codec { return &p.Codec }),
		Format: func(p Policy) string { return p.Codec.String() },
	},
	{
		Key: "scheme", Flag: "scheme", Usage: "delta scheme: progressive (against the previous version) or chain (against the baseline)", Reported: true,
		Parse:  parsed(ParseScheme, func(p *Policy) *Scheme { return &p.Scheme }),
		Format: func(p Policy) string { return p.Scheme.String() },
	},
	{
		Key: "snap_dis", Flag: "snap-dis", Usage: "versions per baseline group (1 = all baselines), or auto", Reported: true,
		Parse:  parsed(ParseSnapDis, func(p *Policy) *int { return &p.SnapDis }),
		Format: func(p Policy) string { return FormatSnapDis(p.SnapDis) },
	},
	{
		Key: "max_depth", Flag: "max-depth", Usage: "with --snap-dis auto: most deltas between a version and its baseline", Number: true,
		Parse:  parsed(parseInt, func(p *Policy) *int { return &p.MaxDepth }),
		Format: func(p Policy) string { return strconv.Itoa(p.MaxDepth) },
	},
}

// Settings lists every setting, in the table's order.
func Settings() []Setting { return slices.Clone(settings) }

// Overlay returns base with the settings named by keys taken from top;
// the others keep base's values. It is how a mount's flags (top, the keys
// of those given) apply over the policy its store keeps (base).
func Overlay(base, top Policy, keys []string) (Policy, error) {
	for _, s := range settings {
		if slices.Contains(keys, s.Key) {
			if err := s.Parse(&base, s.Format(top)); err != nil {
				return base, fmt.Errorf("%s: %w", s.Key, err)
			}
		}
	}
	return base, nil
}

// parsed makes a Setting's Parse from a parser of the field's type and the
// field's place in a Policy. The field changes only if the text parses.
func parsed[T any](parse func(string) (T, error), field func(p *Policy) *T) func(p *Policy, text string) error {
	return func(p *Policy, text string) error {
		v, err := parse(text)
		if err != nil {
			return err
		}
		*field(p) = v
		return nil
	}
}

// parseInt reads an integer setting.
func parseInt(text string) (int, error) {
	n, err := strconv.Atoi(text)
	if err != nil {
		return 0, fmt.Errorf("%q: want an integer", text)
	}
	return n, nil
}

// codecNames lists the codecs for --codec's help.
func codecNames() string {
	var names []string
	for _, c := range encode.Codecs() {
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}
