package image

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// memFile is an in-memory, growable file used as a go-diskfs backend, so the
// whole image is built without touching the disk and every write error on the
// real file is seen by us (go-diskfs ignores some WriteAt errors).
type memFile struct {
	buf []byte
	off int64
	max int64 // writes past max fail
}

var errMemFull = errors.New("in-memory image exceeds its size limit")

func (m *memFile) Stat() (fs.FileInfo, error) { return memInfo{size: int64(len(m.buf))}, nil }
func (m *memFile) Close() error               { return nil }

func (m *memFile) Read(p []byte) (int, error) {
	n, err := m.ReadAt(p, m.off)
	m.off += int64(n)
	return n, err
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read at negative offset %d", off)
	}
	if off >= int64(len(m.buf)) {
		return 0, io.EOF
	}
	n := copy(p, m.buf[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("write at negative offset %d", off)
	}
	end := off + int64(len(p))
	if end > m.max {
		return 0, errMemFull
	}
	if end > int64(len(m.buf)) {
		if end > int64(cap(m.buf)) {
			nb := make([]byte, end, max(end, 2*int64(cap(m.buf))))
			copy(nb, m.buf)
			m.buf = nb
		} else {
			m.buf = m.buf[:end]
		}
	}
	return copy(m.buf[off:], p), nil
}

func (m *memFile) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = m.off + offset
	case io.SeekEnd:
		abs = int64(len(m.buf)) + offset
	default:
		return 0, fmt.Errorf("seek: bad whence %d", whence)
	}
	if abs < 0 {
		return 0, fmt.Errorf("seek to negative offset %d", abs)
	}
	m.off = abs
	return abs, nil
}

type memInfo struct{ size int64 }

func (i memInfo) Name() string       { return "image" }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o600 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
