package image

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat12"
)

const (
	vfatMinSize  = 1 << 20
	vfatStep     = 1 << 20
	vfatMaxSize  = 64 << 20
	vfatOverhead = 64 << 10 // boot sector, two FATs and the fixed root directory, generously
	vfatRootMax  = 224 - 1  // root directory slots (FAT12 layout of go-diskfs) minus the label
)

// vfatSlots is the number of 32-byte directory slots a name takes: one short
// entry plus one per 13 characters of long name (always counted, to be safe).
func vfatSlots(name string) int { return 1 + (len(name)+12)/13 }

// vfatNeed estimates the data bytes the entries occupy with a given cluster size.
func vfatNeed(spec Spec, dirs []string, cluster int64) (need int64, rootSlots int) {
	ru := func(n int64) int64 { return (n + cluster - 1) / cluster * cluster }
	dirSlots := map[string]int{}
	for _, d := range dirs {
		dirSlots[path.Dir(d)] += vfatSlots(path.Base(d))
	}
	for _, e := range spec.Entries {
		need += ru(int64(len(e.Data)))
		dirSlots[path.Dir(e.Path)] += vfatSlots(path.Base(e.Path))
	}
	for _, d := range dirs {
		need += ru(int64(dirSlots[d]+2) * 32) // + "." and ".."
	}
	return need, dirSlots["."]
}

// buildVFAT renders spec into a FAT12 image in memory. The volume is the
// smallest whole number of MiB (at least 1 MiB) that holds the content with
// about 1/16 (at least 64 KiB) free.
func buildVFAT(ctx context.Context, spec Spec, dirs []string) ([]byte, error) {
	var (
		mem  *memFile
		fsys *fat12.FileSystem
		size int64
	)
	first, last := int64(vfatMinSize), int64(vfatMaxSize)
	if spec.Media == MediaFloppy {
		first, last = FloppySize, FloppySize
	}
	for size = first; size <= last; size += vfatStep {
		m := &memFile{max: size}
		f, err := fat12.Create(file.New(m, false), size, 0, 512, spec.Label, true)
		if err != nil {
			continue // cluster count out of FAT12 range at this size; try the next
		}
		// go-diskfs v1.9.4 marks cluster 2 as in use on FAT12 (a FAT32 habit;
		// the FAT12 root directory is a fixed area), which fsck.vfat reports as
		// a lost cluster. Free it in both FAT copies and reopen, so the table
		// go-diskfs keeps in memory is loaded from the corrected bytes.
		if f, err = fat12FreeCluster2(m, size); err != nil {
			return nil, err
		}
		need, rootSlots := vfatNeed(spec, dirs, int64(f.BytesPerCluster()))
		if rootSlots > vfatRootMax {
			return nil, fmt.Errorf("%w: %d root directory slots needed, vfat root holds %d", ErrInvalidSpec, rootSlots, vfatRootMax)
		}
		if need+max(64<<10, need/16) <= size-vfatOverhead || spec.Media == MediaFloppy && need <= size-vfatOverhead {
			mem, fsys = m, f
			break
		}
	}
	if fsys == nil && spec.Media == MediaFloppy {
		return nil, fmt.Errorf("%w: %w: content does not fit a 1.44 MB floppy (%d bytes)", ErrInvalidSpec, ErrTooLarge, FloppySize)
	}
	if fsys == nil {
		return nil, fmt.Errorf("%w: %w: content does not fit a FAT12 volume of %d bytes", ErrInvalidSpec, ErrTooLarge, vfatMaxSize)
	}
	for _, d := range dirs {
		if err := fsys.Mkdir("/" + d); err != nil {
			return nil, fmt.Errorf("vfat mkdir %q: %w", d, err)
		}
	}
	for _, e := range spec.Entries {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("build vfat: %w", err)
		}
		f, err := fsys.OpenFile("/"+e.Path, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return nil, fmt.Errorf("vfat create %q: %w", e.Path, err)
		}
		n, err := f.Write(e.Data)
		cerr := f.Close()
		if err == nil && n != len(e.Data) {
			err = fmt.Errorf("short write %d of %d bytes", n, len(e.Data))
		}
		if err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("vfat write %q: %w", e.Path, err)
		}
	}
	// The backing store only grew as far as written; the volume is size bytes.
	if n := int64(len(mem.buf)); n < size {
		mem.buf = append(mem.buf, make([]byte, size-n)...)
	}
	img := mem.buf[:size]
	stamp, serial := Stamp(spec)
	if err := normalizeFAT12(img, stamp, serial); err != nil {
		return nil, err
	}
	return img, nil
}

// fat12FreeCluster2 clears FAT entry 2 in every FAT copy of the freshly created
// FAT12 image in m and reopens the filesystem.
func fat12FreeCluster2(m *memFile, size int64) (*fat12.FileSystem, error) {
	if len(m.buf) < 512 {
		return nil, fmt.Errorf("vfat: boot sector missing after create")
	}
	bs := m.buf[:512]
	bps := int(binary.LittleEndian.Uint16(bs[11:]))
	rsvd := int(binary.LittleEndian.Uint16(bs[14:]))
	nfats := int(bs[16])
	fatSz := int(binary.LittleEndian.Uint16(bs[22:]))
	for i := 0; i < nfats; i++ {
		off := (rsvd + i*fatSz) * bps
		if off+5 > len(m.buf) {
			return nil, fmt.Errorf("vfat: FAT %d outside the image", i)
		}
		// Entry 2 (even) is byte 3 plus the low nibble of byte 4.
		m.buf[off+3] = 0
		m.buf[off+4] &= 0xF0
	}
	f, err := fat12.Read(file.New(m, false), size, 0, 512)
	if err != nil {
		return nil, fmt.Errorf("vfat: reopen after FAT fix: %w", err)
	}
	return f, nil
}
