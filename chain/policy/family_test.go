package policy

import "testing"

func TestFamilyOf(t *testing.T) {
	for in, want := range map[string]string{
		"checkpoint-500/pytorch_model.bin":  "checkpoint-#/pytorch_model.bin",
		"checkpoint-1000/pytorch_model.bin": "checkpoint-#/pytorch_model.bin",
		"ckpt-000116.pt":                    "ckpt-#.pt",
		"snapshot_iter_2000.caffemodel":     "snapshot_iter_#.caffemodel",
		"run3/epoch12-step400.ckpt":         "run#/epoch#-step#.ckpt",
		"latest.pt":                         "latest.pt",
		"":                                  UnnamedFamily,
		"007":                               "#",
	} {
		if got := FamilyOf(in); got != want {
			t.Errorf("FamilyOf(%q) = %q, want %q", in, got, want)
		}
	}
}
