package ckpttest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// TraceOp is one filesystem operation of a writer fixture's TRACE.txt
// (shared/fixtures/writers/*/TRACE.txt): what a writer did when it saved
// into a mount, in order.
type TraceOp struct {
	Op string // mkdir, create, setattr, rename, write, fsync, release, unlink, rmdir
	// Dir and Name: the directory ("/" for the root) and the name, for
	// mkdir, create, rename (the old name), unlink and rmdir.
	Dir, Name string
	NewName   string // rename's new name (in Dir)
	// Path names the file of setattr, write, fsync and release, relative
	// to the mount's root; a write may name a file by the name it was
	// created under.
	Path       string
	Size       int64 // setattr: the new size (a truncate)
	HasSize    bool  // setattr changes the size
	Fh         bool  // setattr names an open file handle (ftruncate)
	Start, End int64 // write: the bytes [Start, End), a merged run
	Line       int   // 1-based line number in the trace
}

var (
	traceWrite   = regexp.MustCompile(`^write (.+) \[(\d+), (\d+)\)$`)
	traceSetattr = regexp.MustCompile(`^setattr in (.+?)\s+\{(.*)\}$`)
)

// ParseTrace parses a TRACE.txt. An operation it does not know is an
// error, so that a trace of a new writer is not half played.
func ParseTrace(text string) ([]TraceOp, error) {
	var ops []TraceOp
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		op, err := parseTraceLine(line)
		if err != nil {
			return nil, fmt.Errorf("TRACE.txt line %d %q: %w", i+1, line, err)
		}
		op.Line = i + 1
		ops = append(ops, op)
	}
	return ops, nil
}

func parseTraceLine(line string) (TraceOp, error) {
	if m := traceWrite.FindStringSubmatch(line); m != nil {
		start, err1 := strconv.ParseInt(m[2], 10, 64)
		end, err2 := strconv.ParseInt(m[3], 10, 64)
		if err1 != nil || err2 != nil || end < start {
			return TraceOp{}, fmt.Errorf("bad range")
		}
		return TraceOp{Op: "write", Path: m[1], Start: start, End: end}, nil
	}
	if m := traceSetattr.FindStringSubmatch(line); m != nil {
		op := TraceOp{Op: "setattr", Path: m[1]}
		for _, f := range strings.Split(m[2], ",") {
			kv := strings.Fields(f)
			if len(kv) != 2 {
				return TraceOp{}, fmt.Errorf("bad setattr field %q", f)
			}
			switch kv[0] {
			case "size":
				n, err := strconv.ParseInt(kv[1], 10, 64)
				if err != nil {
					return TraceOp{}, err
				}
				op.Size, op.HasSize = n, true
			case "fh":
				op.Fh = true
			}
		}
		return op, nil
	}
	verb, rest, ok := strings.Cut(line, " in ")
	if !ok {
		return TraceOp{}, fmt.Errorf("unknown operation")
	}
	switch verb {
	case "fsync", "release":
		return TraceOp{Op: verb, Path: strings.TrimSpace(rest)}, nil
	case "mkdir", "create", "unlink", "rmdir":
		f := strings.Fields(rest)
		if len(f) != 2 {
			return TraceOp{}, fmt.Errorf("want DIR NAME")
		}
		return TraceOp{Op: verb, Dir: f[0], Name: f[1]}, nil
	case "rename":
		f := strings.Fields(rest)
		if len(f) != 3 {
			return TraceOp{}, fmt.Errorf("want DIR OLD NEW")
		}
		return TraceOp{Op: verb, Dir: f[0], Name: f[1], NewName: f[2]}, nil
	}
	return TraceOp{}, fmt.Errorf("unknown operation %q", verb)
}

// JoinPath is the path of name in dir, as a trace writes dirs ("/" is the
// root, whose children have no prefix).
func JoinPath(dir, name string) string {
	if dir == "/" || dir == "" {
		return name
	}
	return dir + "/" + name
}
