package image

import (
	"encoding/binary"
	"fmt"
	"io"
)

// go-diskfs v1.9.4 allocates buffers sized by on-disk fields (path table
// sizes, directory extent sizes, SUSP continuation lengths) before checking
// them, so a damaged 40 KiB file can make it allocate gigabytes. checkISO walks
// the volume descriptors and every directory tree itself first and rejects
// any of those fields that points outside the file.

const (
	isoMaxDirs    = 4096
	isoMaxRecords = 100000
	isoMaxCEChain = 16
)

type isoChecker struct {
	r        io.ReaderAt
	size     int64
	bs       int64
	seen     map[uint32]bool
	records  int
	dirCount int
}

// checkISO validates the structure of the ISO9660 image in r (size bytes).
func checkISO(r io.ReaderAt, size int64) error {
	c := &isoChecker{r: r, size: size, seen: map[uint32]bool{}}
	vd := make([]byte, isoBlock)
	for i := int64(0); ; i++ {
		off := isoPVDOffset + i*isoBlock
		if off+isoBlock > size || i > 64 {
			return fmt.Errorf("no volume descriptor set terminator")
		}
		if _, err := r.ReadAt(vd, off); err != nil {
			return fmt.Errorf("read volume descriptor %d: %w", i, err)
		}
		if string(vd[1:6]) != "CD001" {
			return fmt.Errorf("volume descriptor %d has no CD001 signature", i)
		}
		switch vd[0] {
		case 255: // terminator
			return nil
		case 1, 2: // primary, supplementary (Joliet)
			bs := int64(binary.LittleEndian.Uint16(vd[128:]))
			if bs != isoBlock { // go-diskfs is told 2048, as every real CD image uses
				return fmt.Errorf("volume descriptor %d: logical block size %d, want %d", i, bs, isoBlock)
			}
			c.bs = bs
			ptSize := int64(binary.LittleEndian.Uint32(vd[132:]))
			ptLoc := int64(binary.LittleEndian.Uint32(vd[140:]))
			if err := c.inFile("path table", ptLoc*bs, ptSize); err != nil {
				return err
			}
			root := vd[156 : 156+34]
			if err := c.dir(binary.LittleEndian.Uint32(root[2:]), binary.LittleEndian.Uint32(root[10:]), 0); err != nil {
				return fmt.Errorf("volume descriptor %d: %w", i, err)
			}
		}
	}
}

func (c *isoChecker) inFile(what string, off, n int64) error {
	if off < 0 || n < 0 || off > c.size || n > c.size-off {
		return fmt.Errorf("%s of %d bytes at %d lies outside the %d-byte image", what, n, off, c.size)
	}
	return nil
}

// dir checks one directory extent and recurses into its subdirectories.
func (c *isoChecker) dir(loc, n uint32, depth int) error {
	if depth > maxWalkDepth {
		return fmt.Errorf("directories nested deeper than %d", maxWalkDepth)
	}
	if c.seen[loc] {
		return nil
	}
	c.seen[loc] = true
	if c.dirCount++; c.dirCount > isoMaxDirs {
		return fmt.Errorf("more than %d directories", isoMaxDirs)
	}
	off := int64(loc) * c.bs
	if err := c.inFile("directory extent", off, int64(n)); err != nil {
		return err
	}
	buf := make([]byte, n)
	if _, err := c.r.ReadAt(buf, off); err != nil {
		return fmt.Errorf("read directory extent at %d: %w", off, err)
	}
	for p := 0; p < len(buf); {
		l := int(buf[p])
		if l == 0 { // rest of this block is padding
			p = (p/int(c.bs) + 1) * int(c.bs)
			continue
		}
		if l < 34 || p+l > len(buf) {
			return fmt.Errorf("directory record of %d bytes at %d overruns its extent", l, off+int64(p))
		}
		if c.records++; c.records > isoMaxRecords {
			return fmt.Errorf("more than %d directory records", isoMaxRecords)
		}
		rec := buf[p : p+l]
		p += l
		extLoc := binary.LittleEndian.Uint32(rec[2:])
		extLen := binary.LittleEndian.Uint32(rec[10:])
		nameLen := int(rec[32])
		if 33+nameLen > l {
			return fmt.Errorf("directory record name overruns the record")
		}
		if err := c.inFile("file extent", int64(extLoc)*c.bs, int64(extLen)); err != nil {
			return err
		}
		su := 33 + nameLen
		if nameLen%2 == 0 {
			su++
		}
		if su < l {
			if err := c.susp(rec[su:]); err != nil {
				return err
			}
		}
		isDir := rec[25]&0x02 != 0
		dot := nameLen == 1 && (rec[33] == 0 || rec[33] == 1)
		if isDir && !dot {
			if err := c.dir(extLoc, extLen, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// susp checks the System Use entries of a record, following CE continuations.
func (c *isoChecker) susp(area []byte) error {
	for hops := 0; ; hops++ {
		var ceOff, ceLen int64 = -1, 0
		for q := 0; q+4 <= len(area); {
			el := int(area[q+2])
			if el < 4 || q+el > len(area) {
				break // not SUSP or padding; go-diskfs will judge the rest
			}
			if area[q] == 'C' && area[q+1] == 'E' && el >= 28 {
				ceOff = int64(binary.LittleEndian.Uint32(area[q+4:]))*c.bs + int64(binary.LittleEndian.Uint32(area[q+12:]))
				ceLen = int64(binary.LittleEndian.Uint32(area[q+20:]))
			}
			q += el
		}
		if ceOff < 0 {
			return nil
		}
		if hops >= isoMaxCEChain {
			return fmt.Errorf("more than %d chained continuation areas", isoMaxCEChain)
		}
		if ceLen > c.bs {
			return fmt.Errorf("continuation area of %d bytes exceeds a %d-byte block", ceLen, c.bs)
		}
		if err := c.inFile("continuation area", ceOff, ceLen); err != nil {
			return err
		}
		area = make([]byte, ceLen)
		if _, err := c.r.ReadAt(area, ceOff); err != nil {
			return fmt.Errorf("read continuation area at %d: %w", ceOff, err)
		}
	}
}
