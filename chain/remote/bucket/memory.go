package bucket

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
)

// Memory is a Bucket in memory, for tests. Fail, if set, is consulted
// before every operation and its error returned (a server that is down).
type Memory struct {
	mu      sync.Mutex
	objects map[string][]byte
	Fail    func(op, key string) error
}

// NewMemory returns an empty in-memory bucket.
func NewMemory() *Memory { return &Memory{objects: map[string][]byte{}} }

func (m *Memory) fail(op, key string) error {
	if m.Fail != nil {
		return m.Fail(op, key)
	}
	return nil
}

func (m *Memory) Put(ctx context.Context, key string, body io.ReadSeeker, size int64, sum string) error {
	if err := m.fail("put", key); err != nil {
		return err
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(body, b); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if h := sha256.Sum256(b); sum != "" && hex.EncodeToString(h[:]) != sum {
		return fmt.Errorf("put %s: body does not match its SHA-256 %s", key, sum)
	}
	m.mu.Lock()
	m.objects[key] = b
	m.mu.Unlock()
	return nil
}

func (m *Memory) Get(ctx context.Context, key string) ([]byte, error) {
	if err := m.fail("get", key); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	return append([]byte(nil), b...), nil
}

func (m *Memory) ReadAt(ctx context.Context, key string, p []byte, off int64) error {
	if err := m.fail("get", key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[key]
	if !ok {
		return fmt.Errorf("read %s: %w", key, ErrNotFound)
	}
	if off < 0 || off+int64(len(p)) > int64(len(b)) {
		return fmt.Errorf("read %s: range [%d,%d) past its %d bytes", key, off, off+int64(len(p)), len(b))
	}
	copy(p, b[off:])
	return nil
}

func (m *Memory) Exists(ctx context.Context, key string) (bool, error) {
	if err := m.fail("head", key); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.objects[key]
	return ok, nil
}

func (m *Memory) List(ctx context.Context, prefix string) ([]string, error) {
	if err := m.fail("list", prefix); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.objects {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := m.fail("delete", key); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.objects, key)
	m.mu.Unlock()
	return nil
}

func (m *Memory) Check(ctx context.Context) error { return m.fail("check", "") }

func (m *Memory) String() string { return "memory://" }

// Corrupt flips a byte of key's object at off (tests).
func (m *Memory) Corrupt(key string, off int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.objects[key]; ok && off < int64(len(b)) {
		b[off] ^= 0xff
	}
}
