package image

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Reproducibility. go-diskfs v1.9.4 puts the builder's environment into the
// bytes it writes: time.Now() in the ISO volume descriptors (in the local
// time zone), the workspace files' mtime/atime/ctime and the builder's
// uid/gid (and the workspace file system's link counts) in Rock Ridge PX/TF
// entries, and the current time (or $SOURCE_DATE_EPOCH) in every FAT
// directory entry. None of them can be passed in: the inode change time of
// the workspace cannot be set at all, and SOURCE_DATE_EPOCH is a
// process-wide environment variable the agent's concurrent builds cannot
// share safely. So after go-diskfs has finished, the finished image is
// walked and each of those fields is overwritten with a value that depends
// on the content only (see Stamp): that is the whole reason this file
// exists. The walks only touch fields go-diskfs is known to write, at
// offsets the ISO 9660 / Rock Ridge (IEEE P1282) and FAT specifications fix.

// stampBase and stampRange bound the content-derived timestamps: from
// 2000-01-01T00:00:00Z, in steps of two seconds (FAT's resolution), over
// 2^28 steps (about 17 years), so every stamp is a valid date in both ISO
// 9660 (years 1900-2155) and FAT (1980-2107) and never lies in the future.
var stampBase = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

const stampRange = 1 << 28

// Stamp returns the timestamp written into every date field of the image
// of spec, and the FAT volume serial number, both derived from a SHA-256
// over the media, the label and every entry's path and bytes (in path
// order). Equal specs give equal stamps; the wall clock, the time zone, the
// builder's uid/gid, umask and $SOURCE_DATE_EPOCH play no part.
func Stamp(spec Spec) (t time.Time, serial uint32) {
	h := sha256.New()
	fmt.Fprintf(h, "vmpayload-image-stamp-v1\x00%s\x00%s\x00", spec.Media, spec.Label)
	entries := slices.Clone(spec.Entries)
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	var n [8]byte
	for _, e := range entries {
		binary.BigEndian.PutUint64(n[:], uint64(len(e.Path)))
		h.Write(n[:])
		h.Write([]byte(e.Path))
		binary.BigEndian.PutUint64(n[:], uint64(len(e.Data)))
		h.Write(n[:])
		h.Write(e.Data)
	}
	sum := h.Sum(nil)
	steps := binary.BigEndian.Uint64(sum[:8]) % stampRange
	serial = binary.BigEndian.Uint32(sum[8:12])
	if serial == 0 {
		serial = 1 // 0 reads as "no serial" to some tools
	}
	return stampBase.Add(time.Duration(steps) * 2 * time.Second), serial
}

// isoDate7 is the 7-byte ISO 9660 directory record date (UTC, offset 0).
func isoDate7(t time.Time) []byte {
	t = t.UTC()
	return []byte{byte(t.Year() - 1900), byte(t.Month()), byte(t.Day()), byte(t.Hour()), byte(t.Minute()), byte(t.Second()), 0}
}

// isoDate17 is the 17-byte volume descriptor date ("YYYYMMDDhhmmsscc" + offset).
func isoDate17(t time.Time) []byte {
	t = t.UTC()
	b := fmt.Appendf(nil, "%04d%02d%02d%02d%02d%02d00", t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second())
	return append(b, 0)
}

// isoUnsetDate17 is a volume descriptor date meaning "not specified".
var isoUnsetDate17 = append([]byte("0000000000000000"), 0)

// Offsets inside an ISO 9660 volume descriptor (ECMA-119 8.4).
const (
	vdCreation     = 813
	vdModification = 830
	vdExpiration   = 847
	vdEffective    = 864
	vdRootRecord   = 156
)

// Rock Ridge POSIX modes written for files and directories.
const (
	rrFileMode = 0o100000 | isoFileMode
	rrDirMode  = 0o040000 | isoDirMode
)

// isoRecord is a directory record found by the walk.
type isoRecord struct {
	off    int   // offset of the record in the image
	susp   []int // offsets of its System Use entries (record and continuation areas)
	isDir  bool
	extLoc uint32
}

type isoNormalizer struct {
	img     []byte
	seen    map[uint32]bool
	subdirs map[uint32]int // directory extent -> number of subdirectories
	recs    []isoRecord
}

// normalizeISO rewrites every date, Rock Ridge PX (mode, links, uid, gid)
// and TF field of the ISO image img in place to values that depend on the
// content only: dates become t, files get mode 0444, directories 0555,
// owner 0:0, files one link and directories two plus their subdirectories.
func normalizeISO(img []byte, t time.Time) error {
	n := &isoNormalizer{img: img, subdirs: map[uint32]int{}}
	d7, d17 := isoDate7(t), isoDate17(t)
	for i := 0; ; i++ {
		off := isoPVDOffset + i*isoBlock
		if off+isoBlock > len(img) || i > 64 {
			return fmt.Errorf("normalize iso: no volume descriptor set terminator")
		}
		vd := img[off : off+isoBlock]
		if string(vd[1:6]) != "CD001" {
			return fmt.Errorf("normalize iso: volume descriptor %d has no CD001 signature", i)
		}
		if vd[0] == 255 {
			break
		}
		if vd[0] != 1 && vd[0] != 2 {
			continue
		}
		copy(vd[vdCreation:], d17)
		copy(vd[vdModification:], d17)
		copy(vd[vdExpiration:], isoUnsetDate17)
		copy(vd[vdEffective:], isoUnsetDate17)
		root := vd[vdRootRecord : vdRootRecord+34]
		copy(root[18:25], d7)
		n.seen = map[uint32]bool{} // each tree (primary, Joliet) on its own
		if err := n.dir(binary.LittleEndian.Uint32(root[2:]), binary.LittleEndian.Uint32(root[10:]), 0, d7); err != nil {
			return fmt.Errorf("normalize iso: volume descriptor %d: %w", i, err)
		}
	}
	for _, r := range n.recs {
		for _, so := range r.susp {
			e := n.img[so:]
			switch {
			case e[0] == 'P' && e[1] == 'X' && e[2] >= 36:
				mode, links := uint32(rrFileMode), uint32(1)
				if r.isDir {
					mode, links = rrDirMode, uint32(2+n.subdirs[r.extLoc])
				}
				putBoth32(e[4:], mode)
				putBoth32(e[12:], links)
				putBoth32(e[20:], 0) // uid
				putBoth32(e[28:], 0) // gid
			case e[0] == 'T' && e[1] == 'F' && e[2] >= 5:
				size, date := 7, d7
				if e[4]&0x80 != 0 {
					size, date = 17, d17
				}
				for p := 5; p+size <= int(e[2]); p += size {
					copy(e[p:], date)
				}
			}
		}
	}
	return nil
}

// putBoth32 writes v as ISO 9660 both-endian 32-bit (LE then BE).
func putBoth32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}

func (n *isoNormalizer) inImage(off, size int64) bool {
	return off >= 0 && size >= 0 && off <= int64(len(n.img)) && size <= int64(len(n.img))-off
}

// dir records the directory extent at block loc (size bytes), rewrites its
// records' dates and recurses into its subdirectories.
func (n *isoNormalizer) dir(loc, size uint32, depth int, d7 []byte) error {
	if depth > maxWalkDepth {
		return fmt.Errorf("directories nested deeper than %d", maxWalkDepth)
	}
	if n.seen[loc] {
		return nil
	}
	n.seen[loc] = true
	if len(n.seen) > isoMaxDirs {
		return fmt.Errorf("more than %d directories", isoMaxDirs)
	}
	base := int64(loc) * isoBlock
	if !n.inImage(base, int64(size)) {
		return fmt.Errorf("directory extent of %d bytes at block %d lies outside the image", size, loc)
	}
	buf := n.img[base : base+int64(size)]
	var sub []isoRecord
	for p := 0; p < len(buf); {
		l := int(buf[p])
		if l == 0 {
			p = (p/isoBlock + 1) * isoBlock
			continue
		}
		if l < 34 || p+l > len(buf) {
			return fmt.Errorf("directory record of %d bytes at %d overruns its extent", l, base+int64(p))
		}
		if len(n.recs) > isoMaxRecords {
			return fmt.Errorf("more than %d directory records", isoMaxRecords)
		}
		rec := buf[p : p+l]
		copy(rec[18:25], d7)
		nameLen := int(rec[32])
		if 33+nameLen > l {
			return fmt.Errorf("directory record name overruns the record")
		}
		r := isoRecord{off: int(base) + p, isDir: rec[25]&0x02 != 0, extLoc: binary.LittleEndian.Uint32(rec[2:])}
		su := 33 + nameLen
		if nameLen%2 == 0 {
			su++
		}
		if su < l {
			var err error
			if r.susp, err = n.suspEntries(int(base)+p+su, l-su); err != nil {
				return err
			}
		}
		n.recs = append(n.recs, r)
		dot := nameLen == 1 && (rec[33] == 0 || rec[33] == 1)
		if r.isDir && !dot {
			n.subdirs[loc]++
			sub = append(sub, r)
		}
		p += l
	}
	for _, r := range sub {
		rec := n.img[r.off:]
		if err := n.dir(r.extLoc, binary.LittleEndian.Uint32(rec[10:]), depth+1, d7); err != nil {
			return err
		}
	}
	return nil
}

// suspEntries returns the image offsets of the System Use entries in the
// area at off (size bytes), following CE continuation areas.
func (n *isoNormalizer) suspEntries(off, size int) ([]int, error) {
	var out []int
	for hops := 0; ; hops++ {
		ceOff, ceLen := int64(-1), int64(0)
		area := n.img[off : off+size]
		for q := 0; q+4 <= len(area); {
			el := int(area[q+2])
			if el < 4 || q+el > len(area) {
				break // padding, or not SUSP
			}
			out = append(out, off+q)
			if area[q] == 'C' && area[q+1] == 'E' && el >= 28 {
				ceOff = int64(binary.LittleEndian.Uint32(area[q+4:]))*isoBlock + int64(binary.LittleEndian.Uint32(area[q+12:]))
				ceLen = int64(binary.LittleEndian.Uint32(area[q+20:]))
			}
			if area[q] == 'S' && area[q+1] == 'T' {
				break
			}
			q += el
		}
		if ceOff < 0 {
			return out, nil
		}
		if hops >= isoMaxCEChain {
			return nil, fmt.Errorf("more than %d chained continuation areas", isoMaxCEChain)
		}
		if ceLen > isoBlock || !n.inImage(ceOff, ceLen) {
			return nil, fmt.Errorf("continuation area of %d bytes at %d lies outside the image", ceLen, ceOff)
		}
		off, size = int(ceOff), int(ceLen)
	}
}

// FAT layout offsets (boot sector and 32-byte directory entries).
const (
	fatVolIDOff    = 39 // BS_VolID of a FAT12/16 extended BPB
	fatEntrySize   = 32
	fatAttrLFN     = 0x0f
	fatAttrDir     = 0x10
	fatMaxClusters = 1 << 16
)

// fatDateTime encodes t as FAT date and time words (two-second resolution).
func fatDateTime(t time.Time) (date, tm uint16) {
	t = t.UTC()
	date = uint16((t.Year()-1980)<<9 | int(t.Month())<<5 | t.Day())
	tm = uint16(t.Hour()<<11 | t.Minute()<<5 | t.Second()/2)
	return date, tm
}

// normalizeFAT12 rewrites the volume serial number of the FAT12 image img
// and the create, access and modify times of every directory entry (the
// volume label, files, directories and their "." and ".." entries) in place.
func normalizeFAT12(img []byte, t time.Time, serial uint32) error {
	if len(img) < 512 {
		return fmt.Errorf("normalize vfat: image of %d bytes has no boot sector", len(img))
	}
	bs := img[:512]
	bps := int(binary.LittleEndian.Uint16(bs[11:]))
	spc := int(bs[13])
	rsvd := int(binary.LittleEndian.Uint16(bs[14:]))
	nfats := int(bs[16])
	rootEnt := int(binary.LittleEndian.Uint16(bs[17:]))
	fatSz := int(binary.LittleEndian.Uint16(bs[22:]))
	if bps != 512 || spc == 0 || rsvd == 0 || nfats == 0 || fatSz == 0 {
		return fmt.Errorf("normalize vfat: unexpected boot sector geometry")
	}
	if bs[38] == 0x29 { // extended boot signature: BS_VolID is present
		binary.LittleEndian.PutUint32(bs[fatVolIDOff:], serial)
	}
	fat := img[rsvd*bps : (rsvd+fatSz)*bps]
	rootOff := (rsvd + nfats*fatSz) * bps
	rootLen := rootEnt * fatEntrySize
	dataOff := rootOff + (rootLen+bps-1)/bps*bps
	clusterLen := spc * bps
	if dataOff > len(img) || rootOff+rootLen > len(img) {
		return fmt.Errorf("normalize vfat: root directory lies outside the image")
	}
	date, tm := fatDateTime(t)
	visited := 0

	next := func(c int) int {
		o := c * 3 / 2
		if o+1 >= len(fat) {
			return 0xfff
		}
		v := int(binary.LittleEndian.Uint16(fat[o:]))
		if c%2 == 1 {
			return v >> 4
		}
		return v & 0xfff
	}
	var walk func(area []byte, depth int) error
	walkChain := func(first, depth int) error {
		for c := first; c >= 2 && c < 0xff8; c = next(c) {
			if visited++; visited > fatMaxClusters {
				return fmt.Errorf("directory cluster chains longer than %d clusters", fatMaxClusters)
			}
			o := dataOff + (c-2)*clusterLen
			if o < dataOff || o+clusterLen > len(img) {
				return fmt.Errorf("directory cluster %d lies outside the image", c)
			}
			if err := walk(img[o:o+clusterLen], depth); err != nil {
				return err
			}
		}
		return nil
	}
	walk = func(area []byte, depth int) error {
		if depth > maxWalkDepth {
			return fmt.Errorf("directories nested deeper than %d", maxWalkDepth)
		}
		for p := 0; p+fatEntrySize <= len(area); p += fatEntrySize {
			e := area[p : p+fatEntrySize]
			if e[0] == 0 {
				return nil // end of directory
			}
			if e[0] == 0xe5 || e[11] == fatAttrLFN {
				continue
			}
			e[13] = 0
			binary.LittleEndian.PutUint16(e[14:], tm)
			binary.LittleEndian.PutUint16(e[16:], date)
			binary.LittleEndian.PutUint16(e[18:], date)
			binary.LittleEndian.PutUint16(e[22:], tm)
			binary.LittleEndian.PutUint16(e[24:], date)
			if e[11]&fatAttrDir != 0 && e[0] != '.' {
				if err := walkChain(int(binary.LittleEndian.Uint16(e[26:])), depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(img[rootOff:rootOff+rootLen], 0); err != nil {
		return fmt.Errorf("normalize vfat: %w", err)
	}
	return nil
}
