// Package remote replicates a store to an object store (docs/REMOTE.md):
// an Uploader copies every committed version's encoded chunks and its
// records to a bucket in the background, then a root that names every
// version and the tree of names; a Replica rebuilds a store's metadata from
// the newest root and serves chunk reads from the bucket, fetched by range
// on demand and cached on local disk.
package remote

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ckptfs/ckptfs/meta"
)

// The object layout under the prefix. Pieces and manifests are named by the
// SHA-256 of their content, so they are immutable, written once and shared
// by whoever has the same bytes; roots are numbered and written last.
const (
	piecesDir    = "pieces/"    // pieces/<sha256>: up to PieceSize bytes of one version's pack
	manifestsDir = "manifests/" // manifests/<sha256>.json: a version's records and its pieces
	rootsDir     = "roots/"     // roots/<seq, 20 digits>.json: versions and names of one moment
)

// formatVersion is written into manifests and roots; a reader refuses a
// later one.
const formatVersion = 1

// DefaultPieceSize is the most bytes of a pack one object holds: big enough
// that request overheads vanish, small enough that an interrupted upload
// loses little and memory stays bounded.
const DefaultPieceSize = 32 << 20

// Piece is one object of a version's pack: pack bytes [Offset, Offset+Size).
type Piece struct {
	Key    string `json:"key"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest is what a reader needs of one version: its record (Pack
// cleared: pieces say where the bytes are), segments and chunks.
type Manifest struct {
	Format   int            `json:"format"`
	Version  meta.Version   `json:"version"`
	Segments []meta.Segment `json:"segments"`
	Chunks   []meta.Chunk   `json:"chunks"`
	Pieces   []Piece        `json:"pieces"`
}

// Dirent is one name in a directory.
type Dirent struct {
	Parent meta.Ino `json:"parent"`
	Name   string   `json:"name"`
	Child  meta.Ino `json:"child"`
}

// Xattr is one extended attribute.
type Xattr struct {
	Ino   meta.Ino `json:"ino"`
	Name  string   `json:"name"`
	Value []byte   `json:"value"`
}

// RootVersion names a version's manifest.
type RootVersion struct {
	ID       meta.VersionID `json:"id"`
	Manifest string         `json:"manifest"`
}

// Root is the store at one moment: every version kept (live ones and the
// bases deltas need) and the tree of names. It is written only once every
// object it names is in the bucket, so a reader that finds a root finds
// everything it needs.
type Root struct {
	Format   int           `json:"format"`
	Seq      uint64        `json:"seq"`
	Created  int64         `json:"created_ns"`
	Versions []RootVersion `json:"versions"`
	Inodes   []meta.Inode  `json:"inodes"`
	Dirents  []Dirent      `json:"dirents"`
	Xattrs   []Xattr       `json:"xattrs,omitempty"`
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func rootKey(seq uint64) string { return fmt.Sprintf("%s%020d.json", rootsDir, seq) }

// rootSeq parses a root's key; ok is false for anything else.
func rootSeq(key string) (uint64, bool) {
	s, ok := strings.CutPrefix(key, rootsDir)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".json")
	if !ok || len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// encodeManifest returns a manifest's bytes and key.
func encodeManifest(m *Manifest) ([]byte, string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, "", err
	}
	return b, manifestsDir + sha(b) + ".json", nil
}

// decodeManifest checks that b is the content its key names and parses it.
func decodeManifest(key string, b []byte) (*Manifest, error) {
	if want := manifestsDir + sha(b) + ".json"; want != key {
		return nil, fmt.Errorf("manifest %s: content does not match its name (SHA-256 %s): %w", key, sha(b), ErrCorrupt)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w: %w", key, ErrCorrupt, err)
	}
	if m.Format > formatVersion {
		return nil, fmt.Errorf("manifest %s: format %d is newer than this ckptfs (%d)", key, m.Format, formatVersion)
	}
	return &m, nil
}
