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
		// Shards of one save keep their numbers; the save's number goes.
		"checkpoint-20/model-00001-of-00003.safetensors":          "checkpoint-#/model-00001-of-00003.safetensors",
		"pytorch_model-00002-of-00002.bin":                        "pytorch_model-00002-of-00002.bin",
		"step-20/__1_0.distcp":                                    "step-#/__1_0.distcp",
		"step-20/__0_0.distcp":                                    "step-#/__0_0.distcp",
		"step-20/.metadata":                                       "step-#/.metadata",
		"iter_0000100/mp_rank_01/model_optim_rng.pt":              "iter_#/mp_rank_01/model_optim_rng.pt",
		"global_step10/zero_pp_rank_3_mp_rank_00_optim_states.pt": "global_step#/zero_pp_rank_3_mp_rank_00_optim_states.pt",
		"ckpt/shard_2-step300.pt":                                 "ckpt/shard_2-step#.pt",
		"epoch=0-step=20.ckpt":                                    "epoch=#-step=#.ckpt",
		"run-2-of-a.pt":                                           "run-#-of-a.pt",
	} {
		if got := FamilyOf(in); got != want {
			t.Errorf("FamilyOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSeriesAndSiblings(t *testing.T) {
	a, b := FamilyOf("s-10/__0_0.distcp"), FamilyOf("s-10/__1_0.distcp")
	if !SiblingShards(a, b) {
		t.Errorf("%q and %q: not siblings", a, b)
	}
	if SiblingShards(a, FamilyOf("s-20/__0_0.distcp")) {
		t.Errorf("the same shard of two saves taken for siblings")
	}
	if SiblingShards(FamilyOf("ckpt_0010.pt"), FamilyOf("last.pt")) {
		t.Errorf("different series taken for siblings")
	}
	if got := SeriesOf("c-3/model-00001-of-00002.safetensors"); got != "c-#/model-#-of-#.safetensors" {
		t.Errorf("SeriesOf = %q", got)
	}
	for _, p := range []string{"a/b-00001-of-00003.x", "__1_2.distcp", "mp_rank_07/x.pt", "x"} {
		if SeriesOf(FamilyOf(p)) != SeriesOf(p) {
			t.Errorf("SeriesOf(FamilyOf(%q)) = %q, SeriesOf = %q", p, SeriesOf(FamilyOf(p)), SeriesOf(p))
		}
	}
}
