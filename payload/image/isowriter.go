package image

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// The in-memory ISO 9660 writer (issue 14; the Joliet tree, issue 35).
//
// It writes two layouts (ISOLayout, recorded in recipes): every new image
// gets isoJolietTree, go-diskfs's primary tree as below plus a Joliet tree
// of every directory (the Joliet section further down); images recorded
// before issue 35 rebuild in go-diskfs's layout (isoCurrent, and
// isoLegacyJoliet for the zeroed Joliet root).
//
// For the go-diskfs layout, layoutISO lays an image out directly in one
// []byte and produces exactly the bytes that go-diskfs v1.9.4 (Finalize
// with Rock Ridge, Joliet when every entry is in the root) followed by a
// normalisation of its dates, owners and modes produced for the same Spec
// in releases before it:
// durable recipes record an image's SHA-256 and a rebuild must give the
// same bytes (docs/durability.md), so the layout below reproduces
// go-diskfs's, including its oddities, with one exception fixed in new
// images (the Joliet root, last point below; isoLegacyJoliet keeps even
// that) and one order made fixed (colliding short names, see
// resolveCollisions). The facts it relies on, learnt from go-diskfs's
// filesystem/iso9660 finalize code (the tests keep go-diskfs as the
// oracle, iso_oracle_test.go):
//
//   - Blocks 0-15 are zero; the primary volume descriptor is block 16, the
//     Joliet supplementary one (if any; always in isoJolietTree) 17, then
//     the terminator. Directory
//     extents start right after, in this order: the root, then every other
//     directory depth first with siblings sorted by their ISO name; each
//     directory's Rock Ridge continuation blocks follow its extent (only the
//     root has one: its "." record carries SP, PX, TF and a CE pointing at the
//     ER entry). Then the L and M path tables (breadth first, siblings by ISO
//     name), the file extents (directory by directory in the same depth-first
//     order, each directory's files sorted by ISO name; an empty file takes no
//     block and shares the next one's location), and with Joliet the Joliet
//     root directory and its two path tables.
//   - ISO names are 8.3: the part before the first dot upper-cased, every
//     character outside A-Z0-9_ replaced by '_', cut to 8, the rest to 3;
//     files get ".EXT;1" (also with an empty extension), directories the bare
//     short name. Names that collide in a directory (files by "NAME.EXT",
//     directories by "NAME") are renumbered (NAME cut to 8-d characters
//     plus d digits, skipping names already taken; resolveCollisions).
//   - Directory records are in raw-name order (the tree walk), not in ISO
//     name order. A record never crosses a block boundary: one that would
//     reach or pass the boundary starts the next block. The recorded extent
//     size is the unpadded size.
//   - Records carry PX (44 bytes with the walk's serial number), TF (modify,
//     access, attribute times, short form) and NM (the raw name); "." and ".."
//     no NM. Joliet records carry the raw name in UCS-2 and no SUSP.
//   - Volume descriptors hold the label unpadded, the preparer
//     "https://github.com/diskfs/go-diskfs", and no other identifiers.
//   - Every date is the content stamp and PX mode/links/uid/gid are
//     0444/1 (files), 0555/2+subdirectories (directories) and 0:0 (what
//     the normalisation after go-diskfs's Finalize wrote).
//   - One go-diskfs write-order effect changes bytes: a file whose size is a
//     multiple of 2048 (or is empty) is followed by a zero block; when that
//     file is the last one and the image has Joliet, the block is the Joliet
//     root's first block, which ends up zeroed, so Joliet readers (Windows,
//     cloudbase-init) see an empty root. (Directory extents get the same
//     padding only when their size is a multiple of 2048, which the boundary
//     rule above rules out.) This is the one place the layouts differ (issue
//     14): isoCurrent, the layout of every new image, writes the Joliet root
//     whole; isoLegacyJoliet reproduces the zeroed block, so that images
//     recorded before the fix rebuild to their recorded bytes (see
//     legacyJolietRetry in write.go and docs/durability.md).

// isoVariant selects one of the ISO layouts the package can produce.
// isoCurrent and isoLegacyJoliet are ISOLayoutGoDiskfs (they differ only
// for specs jolietQuirk reports); isoJolietTree is ISOLayoutJolietTree.
type isoVariant uint8

const (
	// isoCurrent is go-diskfs v1.9.4's layout with an intact Joliet root:
	// the layout of images built between issues 14 and 35.
	isoCurrent isoVariant = iota
	// isoLegacyJoliet is go-diskfs v1.9.4's layout exactly, with the first
	// block of the Joliet root zeroed when the last file is empty or a
	// multiple of 2048 bytes: the bytes of images built before issue 14's
	// fix, used only to rebuild those images from their recipes.
	isoLegacyJoliet
	// isoJolietTree (issue 35) is the layout of every new image: isoCurrent's
	// primary tree, always with a supplementary volume descriptor, and a
	// Joliet tree of every directory and file after the file extents (see
	// the Joliet section below).
	isoJolietTree
)

// variant is the writer's variant of layout l (ISOLayoutLatest resolved).
func (l ISOLayout) variant() isoVariant {
	if l == ISOLayoutGoDiskfs {
		return isoCurrent
	}
	return isoJolietTree
}

const (
	isoPreparer  = "https://github.com/diskfs/go-diskfs"
	rrID         = "IEEE_P1282"
	rrDescriptor = "THE IEEE P1282 PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS."
	rrSource     = "PLEASE CONTACT THE IEEE STANDARDS DEPARTMENT, PISCATAWAY, NJ, USA FOR THE P1282 SPECIFICATION."

	suspPXLen = 44
	suspTFLen = 5 + 3*7
	suspSPLen = 7
	suspCELen = 28
	suspERLen = 8 + len(rrID) + len(rrDescriptor) + len(rrSource)
)

// isoNode is a file or directory of the image being laid out.
type isoNode struct {
	name     string // raw name ("" for the root)
	short    string // ISO short name
	ext      string // ISO extension (files only)
	isDir    bool
	parent   *isoNode
	children []*isoNode // raw-name order
	serial   uint64     // position in the depth-first, name-ordered walk
	data     []byte
	loc      uint32 // first block of the extent
	size     uint32 // file size or unpadded directory extent size
	blocks   uint32
	subdirs  uint32
	ptIndex  uint16 // 1-based index in the path table
	jLoc     uint32 // Joliet extent (directories)
	jSize    uint32
	jIndex   uint16 // 1-based index in the Joliet path table
}

// isoName is the name of n in its ISO 9660 directory record.
func (n *isoNode) isoName() string {
	if n.isDir {
		return n.short
	}
	return n.short + "." + n.ext + ";1"
}

// collisionKey is the name go-diskfs groups colliding entries by.
func (n *isoNode) collisionKey() string {
	if n.isDir || n.ext == "" {
		return n.short
	}
	return n.short + "." + n.ext
}

// isoShortName splits a raw name into the upper-case 8.3 short name and
// extension.
func isoShortName(name string) (short, ext string) {
	short, ext, _ = strings.Cut(name, ".")
	clean := func(s string, n int) string {
		b := make([]byte, 0, len(s))
		for _, c := range s { // one '_' for a non-ASCII character
			switch {
			case c >= 'a' && c <= 'z':
				b = append(b, byte(c-'a'+'A'))
			case c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
				b = append(b, byte(c))
			default:
				b = append(b, '_')
			}
		}
		if len(b) > n {
			b = b[:n]
		}
		return string(b)
	}
	return clean(short, 8), clean(ext, 3)
}

// isoLayout is the plan of an image: its tree and where everything goes.
type isoLayout struct {
	root     *isoNode
	dirs     []*isoNode // extent order: root, then depth first by ISO name
	files    []*isoNode // extent order
	pt       []*isoNode // path table order
	joliet   bool       // a supplementary volume descriptor and a Joliet root
	jTree    bool       // every directory in the Joliet tree (isoJolietTree)
	jpt      []*isoNode // Joliet path table and extent order
	ptSize   uint32
	ptL, ptM uint32
	jptSize  uint32
	jptL     uint32
	jptM     uint32
	total    uint32 // volume size in blocks
}

// planISO builds the tree of spec and assigns every extent for variant v.
func planISO(spec Spec, dirs []string, v isoVariant) (*isoLayout, error) {
	l := &isoLayout{root: &isoNode{isDir: true, short: "\x00"}, joliet: true, jTree: v == isoJolietTree}
	byPath := map[string]*isoNode{".": l.root}
	parentOf := func(p string) *isoNode {
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return l.root
		}
		return byPath[p[:i]]
	}
	for _, d := range dirs { // sorted: parents first
		base := d[strings.LastIndexByte(d, '/')+1:]
		n := &isoNode{name: base, isDir: true}
		n.short, _ = isoShortName(base)
		n.parent = parentOf(d)
		n.parent.children = append(n.parent.children, n)
		n.parent.subdirs++
		byPath[d] = n
		l.joliet = l.jTree
	}
	for i := range spec.Entries {
		e := &spec.Entries[i]
		base := e.Path[strings.LastIndexByte(e.Path, '/')+1:]
		n := &isoNode{name: base, data: e.Data, size: uint32(len(e.Data))}
		n.short, n.ext = isoShortName(base)
		n.parent = parentOf(e.Path)
		n.parent.children = append(n.parent.children, n)
	}
	var serial uint64
	var walk func(n *isoNode) error
	walk = func(n *isoNode) error {
		n.serial = serial
		serial++
		if !n.isDir {
			return nil
		}
		slices.SortFunc(n.children, func(a, b *isoNode) int { return strings.Compare(a.name, b.name) })
		if err := resolveCollisions(n); err != nil {
			return err
		}
		for _, c := range n.children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(l.root); err != nil {
		return nil, err
	}

	// Extent order: directories and files depth first, siblings by ISO name.
	byISOName := func(a, b *isoNode) int { return strings.Compare(a.isoName(), b.isoName()) }
	var order func(n *isoNode)
	order = func(n *isoNode) {
		var ds, fs []*isoNode
		for _, c := range n.children {
			if c.isDir {
				ds = append(ds, c)
			} else {
				fs = append(fs, c)
			}
		}
		slices.SortFunc(ds, byISOName)
		slices.SortFunc(fs, byISOName)
		l.files = append(l.files, fs...)
		for _, d := range ds {
			l.dirs = append(l.dirs, d)
			order(d)
		}
	}
	l.dirs = append(l.dirs, l.root)
	order(l.root)

	// Path table order: breadth first, siblings by ISO name.
	l.pt = []*isoNode{l.root}
	for i := 0; i < len(l.pt); i++ {
		var ds []*isoNode
		for _, c := range l.pt[i].children {
			if c.isDir {
				ds = append(ds, c)
			}
		}
		slices.SortFunc(ds, byISOName)
		l.pt = append(l.pt, ds...)
	}
	for i, d := range l.pt {
		d.ptIndex = uint16(i + 1)
		l.ptSize += uint32(ptRecordLen(len(d.short)))
	}

	loc := uint32(18)
	if l.joliet {
		loc++
	}
	for _, d := range l.dirs {
		d.loc = loc
		d.size = uint32(dirExtentSize(d))
		d.blocks = blocksOf(d.size)
		loc += d.blocks
		if d == l.root {
			loc++ // continuation block of the root's "." record
		}
	}
	ptBlocks := blocksOf(l.ptSize)
	l.ptL, l.ptM = loc, loc+ptBlocks
	loc += 2 * ptBlocks
	for _, f := range l.files {
		f.loc = loc
		f.blocks = blocksOf(f.size)
		loc += f.blocks
	}
	if l.joliet {
		loc = l.planJoliet(loc)
	}
	l.total = loc
	return l, nil
}

// resolveCollisions renumbers the children of dir whose collision keys
// clash, as go-diskfs v1.9.4 did (after xorriso): each group of clashing
// names in turn gets the group's short name cut to 8-d characters plus d
// digits (d as many as the group's size needs, more when those run out),
// counting up from 0 and skipping every name a sibling holds at that
// moment. go-diskfs took the groups in Go map order, which varies from run
// to run; this writer takes them in walk order (the order in which the
// groups' first members come in the directory's raw-name order, which is
// the order go-diskfs inserted them into its map). Where two groups cannot
// take each other's names, the order does not matter and the names are
// go-diskfs's; otherwise they are the ones go-diskfs gave when its map
// yielded the groups in insertion order (the package doc says more).
func resolveCollisions(dir *isoNode) error {
	groups := map[string][]*isoNode{}
	var keys []string
	for _, c := range dir.children {
		k := c.collisionKey()
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], c)
	}
	for _, k := range keys {
		members := groups[k]
		if len(members) < 2 {
			continue
		}
		taken := map[string]bool{}
		for _, c := range dir.children {
			taken[c.collisionKey()] = true
		}
		base, ext := members[0].short, members[0].ext
		if members[0].isDir {
			ext = ""
		}
		resolved := false
		for digits := len(strconv.Itoa(len(members) - 1)); digits < 8 && !resolved; digits++ {
			b := base[:min(len(base), 8-digits)]
			limit := 1
			for range digits {
				limit *= 10
			}
			change := 0
			resolved = true
			for _, m := range members {
				found := false
				for change < limit {
					short := b + fmt.Sprintf("%0*d", digits, change)
					cand := short
					if ext != "" {
						cand += "." + ext
					}
					change++
					if !taken[cand] {
						m.short = short
						taken[cand] = true
						found = true
						break
					}
				}
				if !found {
					resolved = false
					break
				}
			}
		}
		if !resolved {
			return fmt.Errorf("too many ISO short names collide with %q in one directory", k)
		}
	}
	return nil
}

func blocksOf(n uint32) uint32 { return (n + isoBlock - 1) / isoBlock }

// ptRecordLen is the length of a path table record with an n-byte name.
func ptRecordLen(n int) int { return 8 + n + n%2 }

// recordLen is the length of a directory record with an n-byte name and
// suspLen bytes of System Use entries.
func recordLen(n, suspLen int) int {
	l := 33 + n
	if n%2 == 0 {
		l++
	}
	l += suspLen
	return l + l%2
}

// childRecordLen is the length of c's directory record in its parent.
func childRecordLen(c *isoNode) int {
	return recordLen(len(c.isoName()), suspPXLen+suspTFLen+5+len(c.name))
}

const (
	rootSelfRecordLen = 34 + suspSPLen + suspPXLen + suspTFLen + suspCELen + 1 // padded to even
	dotRecordLen      = 34 + suspPXLen + suspTFLen
)

// appendRecord advances an extent of size bytes by a record of n bytes: a
// record that would reach or cross a block boundary starts the next block.
// It returns the record's offset and the new size.
func appendRecord(size, n int) (off, newSize int) {
	if (size+n)/isoBlock > size/isoBlock {
		size += isoBlock - size%isoBlock
	}
	return size, size + n
}

func dirExtentSize(d *isoNode) int {
	self := dotRecordLen
	if d.parent == nil {
		self = rootSelfRecordLen
	}
	size := self + dotRecordLen
	for _, c := range d.children {
		_, size = appendRecord(size, childRecordLen(c))
	}
	return size
}

// isoWriter writes the planned image into img.
type isoWriter struct {
	l    *isoLayout
	img  []byte
	d7   [7]byte
	d17  [17]byte
	name []byte // scratch for UCS-2 names
}

// putBoth32 writes v as ISO 9660 both-endian 32-bit (LE then BE).
func putBoth32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}

// putBoth16 writes v as ISO 9660 both-endian 16-bit (LE then BE).
func putBoth16(b []byte, v uint16) {
	binary.LittleEndian.PutUint16(b, v)
	binary.BigEndian.PutUint16(b[2:], v)
}

// record writes the fixed part and name of a directory record of recLen
// bytes at b.
func (w *isoWriter) record(b []byte, loc, size uint32, dir bool, name []byte, recLen int) {
	b[0] = byte(recLen)
	putBoth32(b[2:], loc)
	putBoth32(b[10:], size)
	copy(b[18:25], w.d7[:])
	if dir {
		b[25] = 2
	}
	putBoth16(b[28:], 1)
	b[32] = byte(len(name))
	copy(b[33:], name)
}

func (w *isoWriter) px(b []byte, n *isoNode) int {
	b[0], b[1], b[2], b[3] = 'P', 'X', suspPXLen, 1
	mode, links := uint32(rrFileMode), uint32(1)
	if n.isDir {
		mode, links = rrDirMode, 2+n.subdirs
	}
	putBoth32(b[4:], mode)
	putBoth32(b[12:], links)
	binary.LittleEndian.PutUint64(b[36:], n.serial)
	return suspPXLen
}

func (w *isoWriter) tf(b []byte) int {
	b[0], b[1], b[2], b[3], b[4] = 'T', 'F', suspTFLen, 1, 0x0e
	for i := range 3 {
		copy(b[5+7*i:], w.d7[:])
	}
	return suspTFLen
}

// dotRecord writes the "." or ".." record of a directory, pointing at n.
func (w *isoWriter) dotRecord(b []byte, n *isoNode, id byte) int {
	w.record(b, n.loc, n.size, true, []byte{id}, dotRecordLen)
	p := 34
	p += w.px(b[p:], n)
	w.tf(b[p:])
	return dotRecordLen
}

func (w *isoWriter) dir(d *isoNode) {
	ext := w.img[int(d.loc)*isoBlock : int(d.loc+d.blocks)*isoBlock]
	p := 0
	if d.parent == nil {
		b := ext
		w.record(b, d.loc, d.size, true, []byte{0}, rootSelfRecordLen)
		q := 34
		copy(b[q:], []byte{'S', 'P', suspSPLen, 1, 0xbe, 0xef, 0})
		q += suspSPLen
		q += w.px(b[q:], d)
		q += w.tf(b[q:])
		ceLoc := d.loc + d.blocks
		copy(b[q:], []byte{'C', 'E', suspCELen, 1})
		putBoth32(b[q+4:], ceLoc)
		putBoth32(b[q+12:], 0)
		putBoth32(b[q+20:], uint32(suspERLen))
		// The extent never ends on a block boundary (a record that would
		// reach it starts the next block), so the continuation block
		// directly follows the extent's padding.
		er := w.img[int(ceLoc)*isoBlock:]
		copy(er, []byte{'E', 'R', byte(suspERLen), 1, byte(len(rrID)), byte(len(rrDescriptor)), byte(len(rrSource)), 1})
		copy(er[8:], rrID+rrDescriptor+rrSource)
		p = rootSelfRecordLen
		p += w.dotRecord(ext[p:], d, 1)
	} else {
		p += w.dotRecord(ext, d, 0)
		p += w.dotRecord(ext[p:], d.parent, 1)
	}
	for _, c := range d.children {
		name := c.isoName()
		n := childRecordLen(c)
		off, end := appendRecord(p, n)
		b := ext[off:end]
		w.record(b, c.loc, c.size, c.isDir, []byte(name), n)
		q := suspStart(len(name))
		q += w.px(b[q:], c)
		q += w.tf(b[q:])
		b[q], b[q+1], b[q+2], b[q+3], b[q+4] = 'N', 'M', byte(5+len(c.name)), 1, 0
		copy(b[q+5:], c.name)
		p = end
	}
}

// pathTables writes the L and M path tables at locL and locM: the primary
// tree's, or with joliet the Joliet tree's.
func (w *isoWriter) pathTables(locL, locM uint32, joliet bool) {
	bl := w.img[int(locL)*isoBlock:]
	bm := w.img[int(locM)*isoBlock:]
	nodes := w.l.pt
	if joliet {
		nodes = w.l.jpt
	}
	p := 0
	for _, d := range nodes {
		name := []byte(d.short)
		loc, parent := d.loc, d.ptIndex
		if d.parent != nil {
			parent = d.parent.ptIndex
		}
		if joliet {
			if d.parent != nil {
				w.name = appendUCS2(w.name[:0], d.name)
				name = w.name
			}
			loc, parent = d.jLoc, d.jIndex
			if d.parent != nil {
				parent = d.parent.jIndex
			}
		}
		bl[p], bm[p] = byte(len(name)), byte(len(name))
		binary.LittleEndian.PutUint32(bl[p+2:], loc)
		binary.BigEndian.PutUint32(bm[p+2:], loc)
		binary.LittleEndian.PutUint16(bl[p+6:], parent)
		binary.BigEndian.PutUint16(bm[p+6:], parent)
		copy(bl[p+8:], name)
		copy(bm[p+8:], name)
		p += ptRecordLen(len(name))
	}
}

func (w *isoWriter) volumeDescriptor(n int, typ byte, label, preparer []byte, ptSize, ptL, ptM, rootLoc, rootSize uint32) []byte {
	b := w.img[(16+n)*isoBlock : (17+n)*isoBlock]
	b[0] = typ
	copy(b[1:], "CD001\x01")
	copy(b[40:72], label)
	putBoth32(b[80:], w.l.total)
	putBoth16(b[120:], 1)
	putBoth16(b[124:], 1)
	putBoth16(b[128:], isoBlock)
	putBoth32(b[132:], ptSize)
	binary.LittleEndian.PutUint32(b[140:], ptL)
	binary.BigEndian.PutUint32(b[148:], ptM)
	w.record(b[vdRootRecord:], rootLoc, rootSize, true, []byte{0}, 34)
	copy(b[446:574], preparer)
	copy(b[vdCreation:], w.d17[:])
	copy(b[vdModification:], w.d17[:])
	copy(b[vdExpiration:], isoUnsetDate17)
	copy(b[vdEffective:], isoUnsetDate17)
	b[881] = 1
	return b
}

// Joliet. Everything Joliet-specific is here, except the places that take
// a joliet switch: planISO, which decides whether an image has Joliet
// (isoJolietTree: always; the go-diskfs layouts: when every entry is in
// the root) and calls planJoliet after placing the files, and layoutISO,
// which writes the Joliet directories, their path tables and the
// supplementary volume descriptor (pathTables and volumeDescriptor with
// Joliet arguments).
//
// The Joliet tree (isoJolietTree, issue 35) is what Windows reads: its CD
// driver ignores Rock Ridge, so without it cloudbase-init finds no
// openstack\latest\meta_data.json. It is a second directory hierarchy over
// the same file extents as the primary tree (Joliet, Microsoft 1995, on
// ECMA-119 as a supplementary volume descriptor):
//
//   - The supplementary volume descriptor (block 17) carries the escape
//     sequence %/E (UCS-2 level 3), the label in UCS-2 padded with UCS-2
//     spaces (a 32-byte field: 16 characters), and the Joliet root record.
//   - Every directory of the primary tree has a Joliet directory, in
//     path-table order (breadth first, siblings by name), after the file
//     extents; then the Joliet L and M path tables.
//   - Names are the raw names in UCS-2 big-endian (at most 64 characters of
//     the Basic Multilingual Plane, no "*/:;?\", no trailing dot: see
//     validateJoliet), without a ";1" version, as genisoimage writes them.
//     Records of a directory are sorted by name (UCS-2 code units, which
//     for the BMP is the raw names' order), after "." and ".."; no record
//     crosses a block boundary, and each directory's recorded size is its
//     whole blocks, as ECMA-119 writers record it. Files point at their
//     primary extents; Joliet records carry no System Use area.
//
// The go-diskfs layouts (isoCurrent, isoLegacyJoliet) have Joliet only for
// specs without directories: the root alone, with its unpadded size and
// the label not padded, as go-diskfs wrote it.

// isoLayoutAppID is the application identifier of isoJolietTree images,
// which Inspect reports as ISOLayoutJolietTree (Info.ISOLayout).
const isoLayoutAppID = "VMPAYLOAD ISO LAYOUT 2"

// planJoliet orders the Joliet directories and places their extents and
// path tables from block loc on; it returns the next free block.
func (l *isoLayout) planJoliet(loc uint32) uint32 {
	l.jpt = []*isoNode{l.root}
	for i := 0; i < len(l.jpt); i++ {
		for _, c := range l.jpt[i].children { // raw-name order
			if c.isDir {
				l.jpt = append(l.jpt, c)
			}
		}
	}
	for i, d := range l.jpt {
		d.jIndex = uint16(i + 1)
		l.jptSize += uint32(ptRecordLen(jolietPTNameLen(d)))
		d.jLoc = loc
		d.jSize = uint32(jolietExtentSize(d))
		loc += blocksOf(d.jSize)
		if l.jTree {
			d.jSize = blocksOf(d.jSize) * isoBlock
		}
	}
	ptBlocks := blocksOf(l.jptSize)
	l.jptL, l.jptM = loc, loc+ptBlocks
	return loc + 2*ptBlocks
}

// jolietLen is the length of n's Joliet name in UCS-2 code units.
func jolietLen(n *isoNode) int {
	k := 0
	for _, r := range n.name {
		k += utf16.RuneLen(r)
	}
	return k
}

// jolietPTNameLen is the length of d's name in the Joliet path table (the
// root's is one byte).
func jolietPTNameLen(d *isoNode) int {
	if d.parent == nil {
		return 1
	}
	return 2 * jolietLen(d)
}

// jolietRecordLen is the length of the Joliet directory record of n.
func jolietRecordLen(n *isoNode) int { return recordLen(2*jolietLen(n), 0) }

// jolietExtentSize is the unpadded size of d's Joliet directory extent.
func jolietExtentSize(d *isoNode) int {
	size := 2 * 34
	for _, c := range d.children {
		_, size = appendRecord(size, jolietRecordLen(c))
	}
	return size
}

// ucs2 is the big-endian UCS-2 form of s (validateJoliet keeps names of
// new images inside the Basic Multilingual Plane; labels are ASCII).
func ucs2(s string) []byte { return appendUCS2(nil, s) }

// appendUCS2 appends the big-endian UCS-2 form of s to b.
func appendUCS2(b []byte, s string) []byte {
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			b = append(b, byte(r1>>8), byte(r1), byte(r2>>8), byte(r2))
			continue
		}
		b = append(b, byte(r>>8), byte(r))
	}
	return b
}

// jolietDir writes the Joliet directory d: "." and "..", then one record
// per child with its name in UCS-2, pointing at the child's Joliet extent
// (directories) or primary extent (files).
func (w *isoWriter) jolietDir(d *isoNode) {
	ext := w.img[int(d.jLoc)*isoBlock:]
	parent := d
	if d.parent != nil {
		parent = d.parent
	}
	w.record(ext, d.jLoc, d.jSize, true, []byte{0}, 34)
	w.record(ext[34:], parent.jLoc, parent.jSize, true, []byte{1}, 34)
	p := 68
	for _, c := range d.children {
		n := jolietRecordLen(c)
		off, end := appendRecord(p, n)
		loc, size := c.loc, c.size
		if c.isDir {
			loc, size = c.jLoc, c.jSize
		}
		w.name = appendUCS2(w.name[:0], c.name)
		w.record(ext[off:], loc, size, c.isDir, w.name, n)
		p = end
	}
}

// jolietQuirk reports whether the planned image is one whose legacy layout
// (isoLegacyJoliet) differs from the current one: it has Joliet and its
// last file in extent order (the largest ISO name in the root) is empty or
// a multiple of 2048 bytes.
func (l *isoLayout) jolietQuirk() bool {
	return l.joliet && !l.jTree && len(l.files) > 0 && l.files[len(l.files)-1].size%isoBlock == 0
}

// layoutISO builds the image of spec in memory in layout v with the content
// time t (Stamp(spec)).
func layoutISO(spec Spec, dirs []string, t time.Time, v isoVariant) ([]byte, error) {
	l, err := planISO(spec, dirs, v)
	if err != nil {
		return nil, fmt.Errorf("lay out iso9660 image: %w", err)
	}
	size := int64(l.total) * isoBlock
	if size > maxImageBytes {
		return nil, fmt.Errorf("lay out iso9660 image: %d bytes exceed the %d-byte limit", size, maxImageBytes)
	}
	w := &isoWriter{l: l, img: make([]byte, size)}
	for _, f := range l.files {
		copy(w.img[int(f.loc)*isoBlock:], f.data)
	}
	copy(w.d7[:], isoDate7(t))
	copy(w.d17[:], isoDate17(t))
	for _, d := range l.dirs {
		w.dir(d)
	}
	for _, d := range l.jpt {
		w.jolietDir(d)
	}
	w.pathTables(l.ptL, l.ptM, false)
	if l.joliet {
		w.pathTables(l.jptL, l.jptM, true)
		if v == isoLegacyJoliet && l.jolietQuirk() {
			// go-diskfs pads the last file with a whole zero block,
			// written over the first block of the Joliet root.
			clear(w.img[int(l.root.jLoc)*isoBlock : int(l.root.jLoc+1)*isoBlock])
		}
	}
	pvd := w.volumeDescriptor(0, 1, []byte(spec.Label), []byte(isoPreparer), l.ptSize, l.ptL, l.ptM, l.root.loc, l.root.size)
	next := 1
	if l.joliet {
		label := ucs2(spec.Label)
		if l.jTree {
			label = ucs2(fmt.Sprintf("%-16.16s", spec.Label))
		}
		svd := w.volumeDescriptor(1, 2, label, ucs2(isoPreparer), l.jptSize, l.jptL, l.jptM, l.root.jLoc, l.root.jSize)
		copy(svd[88:], []byte{0x25, 0x2f, 0x45})
		if l.jTree {
			copy(pvd[574:702], isoLayoutAppID)
			copy(svd[574:702], ucs2(isoLayoutAppID))
		}
		next++
	}
	copy(w.img[(16+next)*isoBlock:], "\xffCD001\x01")
	return w.img, nil
}
