package image

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Reproducibility. Every date an image carries is Stamp's content-derived
// time; the ISO writer writes it (and the fixed owners, modes and link
// counts) directly. go-diskfs v1.9.4, which builds vfat images, puts the
// current time (or $SOURCE_DATE_EPOCH) into every FAT directory entry and
// none of that can be passed in (SOURCE_DATE_EPOCH is a process-wide
// environment variable the agent's concurrent builds cannot share safely).
// So after go-diskfs has finished, the FAT image is walked and each of
// those fields, and the volume serial, is overwritten with a value that
// depends on the content only (normalizeFAT12). The walk only touches
// fields go-diskfs is known to write, at offsets the FAT specification
// fixes.

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

// Rock Ridge POSIX modes written for files and directories.
const (
	rrFileMode = 0o100000 | isoFileMode
	rrDirMode  = 0o040000 | isoDirMode
)

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
