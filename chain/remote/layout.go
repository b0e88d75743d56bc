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

	"github.com/ckptfs/ckptfs/chain"
	"github.com/ckptfs/ckptfs/meta"
)

// The object layout under the prefix. Pieces and manifests are named by the
// SHA-256 of their content, so they are immutable, written once and shared
// by whoever has the same bytes; roots are numbered and written last.
const (
	piecesDir    = "pieces/"    // pieces/<sha256>: up to PieceSize bytes of one version's pack
	manifestsDir = "manifests/" // manifests/<sha256>.json: a version's records and its pieces
	rootsDir     = "roots/"     // roots/<seq, 20 digits>.json: versions and names of one moment
	writersDir   = "writers/"   // writers/<name>/: one writer's pieces, manifests and roots
	membersDir   = "members/"   // members/<name>.json: one writer's newest cut (Member)
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
type Dirent = chain.Dirent

// Xattr is one extended attribute.
type Xattr = chain.Xattr

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
	Format  int    `json:"format"`
	Seq     uint64 `json:"seq"`
	Created int64  `json:"created_ns"`
	// Watermark: every file the writer closed before this moment (its
	// clock, ns) is in this root, unless deleted or replaced since
	// (docs/REMOTE.md, "Consistent cuts"). 0 in roots of ckptfs before it.
	Watermark int64 `json:"watermark_ns,omitempty"`
	// Open are the regular files being written at the snapshot: one
	// with no committed content yet is not shown by readers.
	Open     []meta.Ino    `json:"open,omitempty"`
	Versions []RootVersion `json:"versions"`
	Inodes   []meta.Inode  `json:"inodes"`
	Dirents  []Dirent      `json:"dirents"`
	Xattrs   []Xattr       `json:"xattrs,omitempty"`
}

// Member is what a writer of a run publishes after each pass, at
// members/<name>.json: its newest root and how far that root is complete.
type Member struct {
	Format  int    `json:"format"`
	Writer  string `json:"writer"`
	RootSeq uint64 `json:"root_seq"`
	// Watermark: root RootSeq holds every file closed before it (ns).
	Watermark int64 `json:"watermark_ns"`
	// Updated is when the writer wrote this (its clock, ns).
	Updated int64 `json:"updated_ns"`
	// Closed: the writer unmounted with everything uploaded; until it
	// mounts again it closes nothing more, so it holds no cut back.
	Closed bool `json:"closed,omitempty"`
}

// CheckWriterName refuses a writer name that is not one path element of
// letters, digits, '.', '_' and '-'.
func CheckWriterName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 128 {
		return fmt.Errorf("writer name %q: want 1 to 128 letters, digits, '.', '_' or '-'", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("writer name %q: want 1 to 128 letters, digits, '.', '_' or '-'", name)
		}
	}
	return nil
}

func memberKey(name string) string { return membersDir + name + ".json" }

// writerDir is the prefix of writer name's objects ("" for a store that
// replicates alone, as before writers had names).
func writerDir(name string) string {
	if name == "" {
		return ""
	}
	return writersDir + name + "/"
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
