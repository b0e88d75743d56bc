package chain

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/encode"
	"github.com/ckptfs/ckptfs/meta"
	"github.com/ckptfs/ckptfs/nandsim"
)

// legacyPolicyRecord is the record as releases before the settings table
// wrote it: the table's record must be the same, byte for byte, but for
// the keys of settings added since, after these.
type legacyPolicyRecord struct {
	Codec    string `json:"codec"`
	Scheme   string `json:"scheme"`
	SnapDis  string `json:"snap_dis"`
	MaxDepth int    `json:"max_depth"`
}

func recordPolicies() []policy.Policy {
	return []policy.Policy{policy.Default(),
		{Codec: encode.Zstd, Scheme: policy.ChainScheme, SnapDis: 7, MaxDepth: 9},
		{Codec: encode.Stored, Scheme: policy.Progressive, SnapDis: 1, MaxDepth: 0}}
}

// TestPolicyRecordUnchanged: the record of every policy is the one earlier
// releases wrote, and what they wrote reads back as the same policy.
func TestPolicyRecordUnchanged(t *testing.T) {
	for _, p := range recordPolicies() {
		legacy, _ := json.Marshal(legacyPolicyRecord{Codec: p.Codec.String(), Scheme: p.Scheme.String(),
			SnapDis: policy.FormatSnapDis(p.SnapDis), MaxDepth: p.MaxDepth})
		got, err := encodePolicy(p)
		if err != nil || !extendsRecord(got, legacy) {
			t.Fatalf("record of %+v:\n got %s (%v)\nwant %s", p, got, err, legacy)
		}
		// Read over a policy whose settings of the legacy record all
		// differ (and whose newer ones are p's).
		base := p
		base.Codec, base.Scheme, base.SnapDis, base.MaxDepth = encode.RLE4, 1-p.Scheme, p.SnapDis+2, p.MaxDepth+1
		back, err := decodePolicy(legacy, base)
		if err != nil || back != p {
			t.Fatalf("%s read back as %+v, %v", legacy, back, err)
		}
	}
	// The golden stores' record (chain/testdata/store-v*).
	golden := `{"codec":"planes","scheme":"progressive","snap_dis":"3","max_depth":5}`
	p, err := decodePolicy([]byte(golden), policy.Default())
	want := policy.Default() // for settings newer than the record
	want.Codec, want.Scheme, want.SnapDis, want.MaxDepth = encode.Planes, policy.Progressive, 3, 5
	if err != nil || p != want {
		t.Fatalf("golden record read as %+v, %v; want %+v", p, err, want)
	}
	if b, _ := encodePolicy(p); !extendsRecord(b, []byte(golden)) {
		t.Fatalf("golden record rewritten as %s", b)
	}
}

// extendsRecord says whether record is legacy byte for byte, or legacy
// with the keys of newer settings after its own.
func extendsRecord(record, legacy []byte) bool {
	head := string(bytes.TrimSuffix(legacy, []byte("}"))) + ","
	return bytes.Equal(record, legacy) || bytes.HasPrefix(record, []byte(head))
}

// TestPolicyRecordKeys: a key the record lacks (a setting newer than the
// store) keeps the value given; keys unknown here are ignored; bad values
// are refused with the setting named.
func TestPolicyRecordKeys(t *testing.T) {
	base := policy.Policy{Codec: encode.Zstd, Scheme: policy.ChainScheme, SnapDis: 7, MaxDepth: 9}
	p, err := decodePolicy([]byte(`{"codec":"dynrle","from_the_future":[1]}`), base)
	want := base
	want.Codec = encode.DynRLE
	if err != nil || p != want {
		t.Fatalf("partial record read as %+v, %v; want %+v", p, err, want)
	}
	for _, bad := range []string{`{"codec":"lzma"}`, `{"max_depth":"deep"}`, `{"max_depth":2.5}`, `{"scheme":3}`, `[`} {
		if _, err := decodePolicy([]byte(bad), base); err == nil {
			t.Errorf("record %s accepted", bad)
		}
	}
}

// TestStoredPolicy: a new store records the policy given; reopened, it
// keeps it unless told not to.
func TestStoredPolicy(t *testing.T) {
	db, err := meta.Open(t.TempDir()+"/meta.db", meta.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	first := recordPolicies()[1]
	if p, err := StoredPolicy(db, first, true); err != nil || p != first {
		t.Fatalf("new store: %+v, %v", p, err)
	}
	if p, err := StoredPolicy(db, policy.Default(), true); err != nil || p != first {
		t.Fatalf("reopened: %+v, %v; want the stored %+v", p, err, first)
	}
	if p, err := StoredPolicy(db, policy.Default(), false); err != nil || p != policy.Default() {
		t.Fatalf("reopened with a policy: %+v, %v", p, err)
	}
	if p, _ := StoredPolicy(db, first, true); p != policy.Default() {
		t.Fatalf("the policy given was not recorded: %+v", p)
	}
}

// TestOverridePolicy: the settings named change, the others keep the
// store's values, and the store remembers the result.
func TestOverridePolicy(t *testing.T) {
	dir := t.TempDir()
	kept := recordPolicies()[1]
	ds := openTestStore(t, dir, kept)
	flags := policy.Default()
	if err := ds.OverridePolicy(flags, []string{"scheme"}); err != nil {
		t.Fatal(err)
	}
	want := kept
	want.Scheme = flags.Scheme
	if got := ds.Policy(); got != want {
		t.Fatalf("after --scheme: %+v, want %+v", got, want)
	}
	bad := kept
	bad.SnapDis, bad.MaxDepth = policy.SnapDisAuto, 0
	if err := ds.OverridePolicy(bad, []string{"snap_dis", "max_depth"}); err == nil {
		t.Fatal("an invalid policy was accepted")
	}
	if got := ds.Policy(); got != want {
		t.Fatalf("a refused override changed the policy to %+v", got)
	}
	ds.Close()
	reopen := func(p policy.Policy) *DirStore {
		t.Helper()
		ds, err := OpenDir(dir, DirOptions{Options: Options{Policy: p}, Device: nandsim.SmallConfig(), NoSync: true, StoredPolicy: true})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	ds = reopen(policy.Default())
	if got := ds.Policy(); got != want {
		t.Fatalf("reopened: %+v, want %+v", got, want)
	}
	// A record made before max_depth existed: the store opens with the
	// flag's value, and the override must record it, though the policy
	// in use already has it.
	old := withoutKey(t, want, "max_depth")
	if err := ds.DB.Update(func(tx *meta.Tx) error { return tx.SetConfig(policyConfig, old) }); err != nil {
		t.Fatal(err)
	}
	ds.Close()
	flags.MaxDepth = 6
	ds = reopen(flags)
	if err := ds.OverridePolicy(flags, []string{"max_depth"}); err != nil {
		t.Fatal(err)
	}
	ds.Close()
	want.MaxDepth = 6
	ds = reopen(policy.Default())
	defer ds.Close()
	if got := ds.Policy(); got != want {
		t.Fatalf("reopened after --max-depth over an old record: %+v, want %+v", got, want)
	}
}

// withoutKey is p's record without key: a record of a store made before
// that setting existed.
func withoutKey(t *testing.T, p policy.Policy, key string) []byte {
	t.Helper()
	b, err := encodePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	delete(rec, key)
	b, _ = json.Marshal(rec)
	return b
}

// TestSummaryShowsReportedSettings: the report's summary has a field for
// each setting the table says it shows, holding the setting's text, and
// none for the others.
func TestSummaryShowsReportedSettings(t *testing.T) {
	p := recordPolicies()[1]
	ds := openTestStore(t, "", p)
	defer ds.Close()
	r, _, err := ds.Figures()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range policy.Settings() {
		text, ok := r.PolicyText(s.Key)
		switch {
		case s.Reported && (!ok || text != s.Format(p)):
			t.Errorf("report shows %s as %q (field: %v), want %q", s.Key, text, ok, s.Format(p))
		case !s.Reported && ok:
			t.Errorf("report has a field for %s, which the table does not report", s.Key)
		}
	}
}
