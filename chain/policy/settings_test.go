package policy

import (
	"strconv"
	"testing"

	"github.com/ckptfs/ckptfs/encode"
)

// samplePolicies differ from the default in every setting, one at a time
// and all together.
func samplePolicies() []Policy {
	d := Default()
	all := Policy{Codec: encode.Zstd, Scheme: ChainScheme, SnapDis: 7, MaxDepth: 9}
	ps := []Policy{d, all}
	for _, change := range []func(p *Policy){
		func(p *Policy) { p.Codec = encode.DynRLE },
		func(p *Policy) { p.Scheme = ChainScheme },
		func(p *Policy) { p.SnapDis = 1 },
		func(p *Policy) { p.MaxDepth = 12 },
	} {
		p := d
		change(&p)
		ps = append(ps, p)
	}
	return ps
}

// TestSettingsTable: keys and flags are unique and named as they always
// were, each setting's text round-trips, and a Number setting's text is an
// integer (its flag is an int flag, its record value a JSON number).
func TestSettingsTable(t *testing.T) {
	keys, flags := map[string]bool{}, map[string]bool{}
	for _, s := range Settings() {
		if s.Key == "" || s.Flag == "" || s.Usage == "" || s.Parse == nil || s.Format == nil {
			t.Fatalf("setting %+v is missing a part", s)
		}
		if keys[s.Key] || flags[s.Flag] {
			t.Fatalf("setting %s: key or flag %s used twice", s.Key, s.Flag)
		}
		keys[s.Key], flags[s.Flag] = true, true
		for _, p := range samplePolicies() {
			text := s.Format(p)
			var q Policy
			if err := s.Parse(&q, text); err != nil || s.Format(q) != text {
				t.Errorf("%s: %q parsed back as %q, %v", s.Key, text, s.Format(q), err)
			}
			if _, err := strconv.Atoi(text); s.Number && err != nil {
				t.Errorf("%s is a Number setting but formats as %q", s.Key, text)
			}
		}
	}
	// Stores and scripts know these: the first four never change.
	want := []struct{ key, flag, def string }{
		{"codec", "codec", encode.DefaultCodec.String()}, {"scheme", "scheme", "progressive"},
		{"snap_dis", "snap-dis", "auto"}, {"max_depth", "max-depth", "3"},
	}
	got := Settings()
	for i, w := range want {
		if got[i].Key != w.key || got[i].Flag != w.flag || got[i].Default() != w.def {
			t.Errorf("setting %d: %s --%s default %q, want %s --%s default %q", i, got[i].Key, got[i].Flag, got[i].Default(), w.key, w.flag, w.def)
		}
	}
}

// TestSettingsParseRefuses: a bad value is refused, and leaves the
// setting as it was.
func TestSettingsParseRefuses(t *testing.T) {
	bad := map[string]string{"codec": "lzma", "scheme": "sideways", "snap_dis": "0", "max_depth": "deep"}
	for _, s := range Settings() {
		text, ok := bad[s.Key]
		if !ok {
			continue
		}
		p := samplePolicies()[1] // no setting at its zero value
		was := s.Format(p)
		if err := s.Parse(&p, text); err == nil {
			t.Errorf("%s accepted %q", s.Key, text)
		}
		if s.Format(p) != was {
			t.Errorf("%s: a refused %q changed the value from %q to %q", s.Key, text, was, s.Format(p))
		}
	}
}

// TestOverlay: the settings named take top's values, the others keep
// base's.
func TestOverlay(t *testing.T) {
	base := Policy{Codec: encode.Zstd, Scheme: ChainScheme, SnapDis: 7, MaxDepth: 9}
	top := Default()
	got, err := Overlay(base, top, []string{"scheme", "max_depth"})
	want := Policy{Codec: encode.Zstd, Scheme: top.Scheme, SnapDis: 7, MaxDepth: top.MaxDepth}
	if err != nil || got != want {
		t.Fatalf("Overlay = %+v, %v; want %+v", got, err, want)
	}
	if got, err := Overlay(base, top, nil); err != nil || got != base {
		t.Fatalf("Overlay of no settings = %+v, %v; want the base", got, err)
	}
}
