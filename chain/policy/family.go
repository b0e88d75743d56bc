package policy

import "strings"

// UnnamedFamily is the family of content written to a file with no name.
// No path maps to it: paths are relative and never start with a slash.
const UnnamedFamily = "/unnamed"

// FamilyOf names the checkpoint series a path belongs to: the path with every
// run of decimal digits replaced by '#'. Consecutive checkpoints such as
// checkpoint-500/pytorch_model.bin and checkpoint-1000/pytorch_model.bin, or
// snapshot_iter_2000.caffemodel and snapshot_iter_4000.caffemodel, share a
// family; rewriting one path stays in its family. A file with no name (made
// with O_TMPFILE, or written after its last name went) belongs to
// UnnamedFamily.
func FamilyOf(path string) string {
	if path == "" {
		return UnnamedFamily
	}
	var b strings.Builder
	b.Grow(len(path))
	inDigits := false
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c >= '0' && c <= '9' {
			if !inDigits {
				b.WriteByte('#')
			}
			inDigits = true
			continue
		}
		inDigits = false
		b.WriteByte(c)
	}
	return b.String()
}
