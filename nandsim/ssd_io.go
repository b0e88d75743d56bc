package nandsim

import "fmt"

// pageCount checks a buffer length and returns it in pages.
func (s *SSD) pageCount(n int) (int64, error) {
	if n <= 0 || n%s.cfg.PageSize != 0 {
		return 0, fmt.Errorf("%w: %d bytes, page size %d", ErrBadLength, n, s.cfg.PageSize)
	}
	return int64(n / s.cfg.PageSize), nil
}

func (s *SSD) inRange(lpn, n int64) bool {
	return lpn >= 0 && n >= 0 && lpn <= s.LogicalPages()-n
}

// begin takes the shared lifetime lock; the caller must call s.life.RUnlock.
func (s *SSD) begin() error {
	s.life.RLock()
	if s.closed {
		s.life.RUnlock()
		return ErrClosed
	}
	return nil
}

// WritePages stores data (whole pages) at lpn and runs it through the FTL.
func (s *SSD) WritePages(lpn int64, data []byte) error {
	n, err := s.pageCount(len(data))
	if err != nil {
		return fmt.Errorf("write pages at %d: %w", lpn, err)
	}
	if !s.inRange(lpn, n) {
		return fmt.Errorf("write pages %d+%d: %w (%d logical pages)", lpn, n, ErrOutOfSpace, s.LogicalPages())
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	if err := s.st.writeAt(data, lpn*int64(s.cfg.PageSize)); err != nil {
		return fmt.Errorf("write pages %d+%d: %w", lpn, n, err)
	}
	s.mu.Lock()
	if s.hc == nil {
		defer s.mu.Unlock()
		return s.accountLocked(lpn, n)
	}
	over := s.dirtyLocked(lpn, n)
	s.mu.Unlock()
	if over {
		return s.writeBack(false) // the background limit
	}
	return nil
}

// Account has the FTL effect and counters of writing n pages at lpn, but
// stores no content: for metadata write estimates and the shadow device.
func (s *SSD) Account(lpn int64, n int64) error {
	if n < 0 || !s.inRange(lpn, n) {
		return fmt.Errorf("account pages %d+%d: %w (%d logical pages)", lpn, n, ErrOutOfSpace, s.LogicalPages())
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accountLocked(lpn, n)
}

// accountLocked runs n pages at lpn through the FTL. Caller holds s.mu.
func (s *SSD) accountLocked(lpn, n int64) error {
	if n > 0 {
		s.dirty = true
	}
	for i := int64(0); i < n; i++ {
		if err := s.f.write(int32(lpn + i)); err != nil {
			return fmt.Errorf("write page %d: %w", lpn+i, err)
		}
	}
	return nil
}

// ReadPages fills buf (whole pages) from lpn. Pages never written, or
// trimmed, read as zeros. Only mapped pages cost flash time.
func (s *SSD) ReadPages(lpn int64, buf []byte) error {
	n, err := s.pageCount(len(buf))
	if err != nil {
		return fmt.Errorf("read pages at %d: %w", lpn, err)
	}
	if !s.inRange(lpn, n) {
		return fmt.Errorf("read pages %d+%d: %w (%d logical pages)", lpn, n, ErrOutOfRange, s.LogicalPages())
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	if err := s.st.readAt(buf, lpn*int64(s.cfg.PageSize)); err != nil {
		return fmt.Errorf("read pages %d+%d: %w", lpn, n, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirty = true
	for i := int64(0); i < n; i++ {
		s.f.read(int32(lpn + i))
	}
	return nil
}

// Trim unmaps n pages from lpn: their flash pages become invalid (GC will
// not copy them) and a file backing gets a hole.
func (s *SSD) Trim(lpn, n int64) error {
	if n < 0 || !s.inRange(lpn, n) {
		return fmt.Errorf("trim pages %d+%d: %w (%d logical pages)", lpn, n, ErrOutOfRange, s.LogicalPages())
	}
	if n == 0 {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	ps := int64(s.cfg.PageSize)
	if err := s.st.trim(lpn*ps, n*ps); err != nil {
		return fmt.Errorf("trim pages %d+%d: %w", lpn, n, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirty = true
	if s.hc != nil {
		s.cleanLocked(lpn, n)
	}
	for i := int64(0); i < n; i++ {
		s.f.trim(int32(lpn + i))
	}
	return nil
}
