package chain

import (
	"github.com/ckptfs/ckptfs/chain/namespace"
	"github.com/ckptfs/ckptfs/meta"
)

// FileInfo says how a file's committed content is stored.
type FileInfo struct {
	Version     meta.VersionID
	Reference   meta.VersionID // 0 for a baseline
	Depth       uint32
	StoredBytes int64
	Codec       string
	Family      string
	Format      string
	Pack        []meta.Extent // backend blocks holding the encoded chunks
	Ingest      string        // "stream" or "fallback" (IngestMode)
	RefReason   string        // why Reference was chosen (meta.RefSameFile, ...); "" for a baseline
	RefPath     string        // the path Reference was saved under
	Size        int64         // the content's size
	Checksum    uint32        // CRC-32C of the content
	// Fidelity is "exact", or the lossy scheme an archive tier applied
	// (`ckptfs repack --lossy`; encode.Lossy).
	Fidelity string
}

// FidelityOf is "exact", or the lossy scheme applied to v's tensors.
func FidelityOf(v *meta.Version) string {
	if v.Fidelity == "" {
		return "exact"
	}
	return v.Fidelity
}

// IngestMode names how a version was ingested: streamed, as every save is
// now, or through the fallback (a draft staged and re-read at commit),
// which earlier releases had: a store they wrote may still hold such
// versions.
func IngestMode(v *meta.Version) string {
	if v.Fallback {
		return "fallback"
	}
	return "stream"
}

// Info describes inode ino's committed content; nil for an empty file or a
// non-file.
func (s *Store) Info(ino meta.Ino) (*FileInfo, error) {
	var info *FileInfo
	err := s.db.View(func(tx *meta.Tx) error {
		n, err := tx.Inode(ino)
		if err != nil || n.Version == 0 {
			return err
		}
		v, err := tx.Version(n.Version)
		if err != nil {
			return err
		}
		info = &FileInfo{Version: v.ID, Reference: v.Ref, Depth: v.Depth, StoredBytes: v.PackBytes,
			Codec: v.Codec, Family: v.Family, Format: v.Format, Pack: v.Pack, Ingest: IngestMode(v), RefReason: v.RefReason,
			Size: v.Size, Checksum: v.Checksum, Fidelity: FidelityOf(v)}
		if ref, err := versionOrNil(tx, v.Ref); err == nil && ref != nil {
			info.RefPath = ref.Path
		}
		return nil
	})
	return info, namespace.NotFound("info", err)
}

// FSStat is the filesystem's size in the backend's blocks.
type FSStat struct {
	PageSize  int
	Pages     int64
	FreePages int64
	Inodes    uint64
}

// SpaceBytes is the backend's size and its free bytes less those fallocate
// holds for files being written: Statfs without the inode count, cheap
// enough for every write.
func (s *Store) SpaceBytes() (total, free int64) {
	total, free = s.data.Space()
	free = max(0, free-s.reservedFiles())
	bs := int64(s.blockSize)
	return total * bs, free * bs
}

// Statfs reports the backend's space and what is free in it: its free
// blocks less those fallocate holds for files being written
// (ReserveSpace), which a plain filesystem would have allocated already.
func (s *Store) Statfs() FSStat {
	var inodes uint64
	_ = s.db.View(func(tx *meta.Tx) error { inodes = tx.Counter("next_ino"); return nil })
	total, free := s.data.Space()
	free = max(0, free-s.reservedFiles())
	return FSStat{PageSize: s.blockSize, Pages: total, FreePages: free, Inodes: inodes}
}
