package chain

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ckptfs/ckptfs/chain/policy"
	"github.com/ckptfs/ckptfs/meta"
)

// policyConfig is the key of the policy record in the store's config.
const policyConfig = "policy"

// The policy record is a JSON object with one key per setting of the
// table (policy.Settings), in its order: a string, or a number for a
// Number setting ({"codec":"planes","scheme":"progressive",
// "snap_dis":"auto","max_depth":3}). Built from the table, so that a new
// setting is remembered without a change here; a record made before a
// setting existed lacks its key, and the setting keeps the value the store
// is opened with (its default, or its flag).

// encodePolicy is p's record.
func encodePolicy(p policy.Policy) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, s := range policy.Settings() {
		if i > 0 {
			b.WriteByte(',')
		}
		var value any = s.Format(p)
		if s.Number {
			value = json.Number(s.Format(p))
		}
		k, _ := json.Marshal(s.Key)
		v, err := json.Marshal(value)
		if err != nil {
			return nil, fmt.Errorf("policy record %s: %w", s.Key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// decodePolicy returns p with the settings the record b holds; keys of
// settings this release does not know are ignored.
func decodePolicy(b []byte, p policy.Policy) (policy.Policy, error) {
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(b, &rec); err != nil {
		return p, fmt.Errorf("stored policy: %w", err)
	}
	for _, s := range policy.Settings() {
		raw, ok := rec[s.Key]
		if !ok || string(raw) == "null" {
			continue
		}
		text, err := recordText(raw, s.Number)
		if err == nil {
			err = s.Parse(&p, text)
		}
		if err != nil {
			return p, fmt.Errorf("stored policy %s: %w", s.Key, err)
		}
	}
	return p, nil
}

// recordText is the text of a record's value: a number's digits, or a
// string.
func recordText(raw json.RawMessage, number bool) (string, error) {
	if number {
		var n json.Number
		err := json.Unmarshal(raw, &n)
		return n.String(), err
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// recordPolicy keeps p in the store's config.
func recordPolicy(tx *meta.Tx, p policy.Policy) error {
	b, err := encodePolicy(p)
	if err != nil {
		return err
	}
	return tx.SetConfig(policyConfig, b)
}

// StoredPolicy returns the policy to use and records it in the store: the
// stored one if useStored and there is one, else p.
func StoredPolicy(db *meta.DB, p policy.Policy, useStored bool) (policy.Policy, error) {
	err := db.Update(func(tx *meta.Tx) error {
		if b := tx.Config(policyConfig); useStored && b != nil {
			var err error
			p, err = decodePolicy(b, p)
			return err
		}
		return recordPolicy(tx, p)
	})
	return p, err
}

// OverridePolicy sets the settings named by keys (policy.Setting.Key) to
// their values in p, keeps the others, and records the result: a mount's
// coding flags apply over the policy the store was last mounted with,
// each to its own setting. Like any policy, it applies to versions
// written afterwards.
func (s *Store) OverridePolicy(p policy.Policy, keys []string) error {
	s.policyMu.Lock()
	defer s.policyMu.Unlock()
	merged, err := policy.Overlay(s.pol, p, keys)
	if err != nil {
		return err
	}
	if err := merged.Validate(); err != nil {
		return err
	}
	rec, err := encodePolicy(merged)
	if err != nil {
		return err
	}
	// Compared with the record, not with the policy in use: a record made
	// before a setting existed lacks it, and the store already uses the
	// flag's value for it, which the record must now keep.
	err = s.db.Update(func(tx *meta.Tx) error {
		if bytes.Equal(tx.Config(policyConfig), rec) {
			return nil
		}
		return tx.SetConfig(policyConfig, rec)
	})
	if err != nil {
		return fmt.Errorf("record policy: %w", err)
	}
	s.pol = merged
	return nil
}
