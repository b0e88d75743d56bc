package encode

import "testing"

func TestDTypeRoundTrip(t *testing.T) {
	widths := map[DType]int{Bytes: 1, Float32: 4, Float16: 2, BFloat16: 2, Float64: 8}
	for d, w := range widths {
		if d.Width() != w {
			t.Errorf("%v.Width() = %d, want %d", d, d.Width(), w)
		}
		got, err := ParseDType(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDType(%q) = %v, %v", d.String(), got, err)
		}
	}
	if _, err := ParseDType("int8"); err == nil {
		t.Error("ParseDType(int8) succeeded, want error")
	}
	if DType(200).Valid() {
		t.Error("DType(200) reported valid")
	}
}
