package analyze

import (
	"archive/zip"
	"io"
	"strings"
)

// torchPickleCap bounds the data.pkl read to name storages: real state
// dicts' pickles are kilobytes to a few megabytes.
const torchPickleCap = 256 << 20

// torchStorageNames names the storages of a torch.save zip by the dict-key
// paths its pickle gives them, keyed as the detector keys their spans
// ("data/<key>"). A file it cannot read yields no names, not an error:
// names only label the comparison.
func torchStorageNames(path string) map[string]string {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return nil
	}
	defer zr.Close()
	var pkl *zip.File
	for _, f := range zr.File {
		dir, rest, ok := strings.Cut(f.Name, "/")
		if !ok && f.Name == "data.pkl" || ok && dir != "" && rest == "data.pkl" {
			if pkl != nil {
				return nil // two archives' pickles: whose storage is data/0?
			}
			pkl = f
		}
	}
	if pkl == nil || pkl.UncompressedSize64 > torchPickleCap {
		return nil
	}
	rc, err := pkl.Open()
	if err != nil {
		return nil
	}
	defer rc.Close()
	p, err := io.ReadAll(io.LimitReader(rc, torchPickleCap))
	if err != nil {
		return nil
	}
	return StorageNames(p)
}
