package chain

import (
	"reflect"
	"strings"
)

// PolicyText is the text of the policy setting key (policy.Setting.Key)
// in the summary, and whether the summary shows that setting: the field
// whose JSON key is the setting's. The report's keys are fixed by its
// JSON, so a reported setting has a field of its own; finding it by key
// lets the text report follow the settings table (policy.Settings) and
// work alike on a report made here and one read back from JSON.
func (r *Summary) PolicyText(key string) (string, bool) {
	v := reflect.ValueOf(r).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == key && f.Type.Kind() == reflect.String {
			return v.Field(i).String(), true
		}
	}
	return "", false
}
