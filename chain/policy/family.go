package policy

import "strings"

// UnnamedFamily is the family of content written to a file with no name.
// No path maps to it: paths are relative and never start with a slash.
const UnnamedFamily = "/unnamed"

// FamilyOf names the checkpoint series a path belongs to: the path with every
// run of decimal digits replaced by '#', except the digits that number a
// shard of one save (see shardDigits). Consecutive checkpoints such as
// checkpoint-500/pytorch_model.bin and checkpoint-1000/pytorch_model.bin, or
// snapshot_iter_2000.caffemodel and snapshot_iter_4000.caffemodel, share a
// family; rewriting one path stays in its family; the shards of one save
// (model-00001-of-00003.safetensors and model-00002-of-00003.safetensors,
// DCP's __0_0.distcp and __1_0.distcp, mp_rank_00/ and mp_rank_01/) are
// families of their own, each continued by the same shard of the next save.
// A file with no name (made with O_TMPFILE, or written after its last name
// went) belongs to UnnamedFamily.
func FamilyOf(path string) string {
	return familyOf(path, true)
}

// SeriesOf is FamilyOf with shard numbers replaced too: two families with
// the same series and different names are sibling shards, never each
// other's reference.
func SeriesOf(path string) string {
	return familyOf(path, false)
}

func familyOf(path string, keepShards bool) string {
	if path == "" {
		return UnnamedFamily
	}
	var b strings.Builder
	b.Grow(len(path))
	for i := 0; i < len(path); {
		c := path[i]
		if c < '0' || c > '9' {
			b.WriteByte(c)
			i++
			continue
		}
		j := i
		for j < len(path) && path[j] >= '0' && path[j] <= '9' {
			j++
		}
		if keepShards && shardDigits(path, i, j) {
			b.WriteString(path[i:j])
		} else {
			b.WriteByte('#')
		}
		i = j
	}
	return b.String()
}

// shardDigits reports whether the digit run path[i:j] numbers a shard or a
// rank of one save rather than the save itself, by the conventions of
// today's writers: Hugging Face's "-00001-of-00003", torch.distributed
// checkpoint's "__0_0.distcp", DeepSpeed's and Megatron's "rank_00",
// "mp_rank_01", and "shard3"/"shard_3".
func shardDigits(path string, i, j int) bool {
	before, after := path[:i], path[j:]
	// -K-of-N: K is followed by "-of-" and digits; N is preceded by it.
	if strings.HasSuffix(before, "-") && strings.HasPrefix(after, "-of-") && startsWithDigit(after[4:]) {
		return true
	}
	if strings.HasSuffix(before, "-of-") && endsWithDigitRunAfterDash(before[:len(before)-4]) {
		return true
	}
	// DCP: __R_N.distcp (rank R, file N of that rank).
	if base := before[strings.LastIndexByte(before, '/')+1:]; strings.HasPrefix(base, "__") {
		rest := base[2:] + path[i:]
		if end := strings.IndexByte(rest, '/'); end >= 0 {
			rest = rest[:end]
		}
		if strings.HasSuffix(rest, ".distcp") {
			return true
		}
	}
	lower := strings.ToLower(before)
	for _, word := range []string{"rank", "shard"} {
		for _, sep := range []string{"", "_", "-"} {
			if strings.HasSuffix(lower, word+sep) {
				return true
			}
		}
	}
	return false
}

func startsWithDigit(s string) bool { return s != "" && s[0] >= '0' && s[0] <= '9' }

// endsWithDigitRunAfterDash reports whether s ends in "-" and digits.
func endsWithDigitRunAfterDash(s string) bool {
	k := len(s)
	for k > 0 && s[k-1] >= '0' && s[k-1] <= '9' {
		k--
	}
	return k < len(s) && k > 0 && s[k-1] == '-'
}

// SiblingShards reports whether families a and b are different shards of
// the same series.
func SiblingShards(a, b string) bool {
	return a != b && SeriesOf(a) == SeriesOf(b)
}
