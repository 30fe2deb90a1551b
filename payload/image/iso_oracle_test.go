package image

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// go-diskfs as the oracle of the ISO writer. Images recorded before the
// in-memory writer (issue 14) were built by go-diskfs v1.9.4's Finalize
// followed by normalizeISO, which overwrote every field go-diskfs filled
// from the builder's environment (dates, Rock Ridge owners, modes and
// link counts) with content-derived values. The writer reproduces those
// bytes; the tests here build the same specs the old way and compare.
// None of this is production code.

// buildISODiskfs renders spec the way releases before issue 14 did:
// go-diskfs's workspace tree, Finalize with Rock Ridge (and Joliet when
// every entry is in the root), then normalizeISO. Its Joliet root is
// zeroed when the last file is empty or a multiple of 2048 bytes (the
// legacy layout, isoLegacyJoliet).
func buildISODiskfs(tb testing.TB, spec Spec, dirs []string) []byte {
	tb.Helper()
	ws, err := os.MkdirTemp("", "vmpayload-iso-oracle-")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() {
		_ = filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
		_ = os.RemoveAll(ws)
	}()
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(ws, filepath.FromSlash(d)), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	joliet := true
	for _, e := range spec.Entries {
		if strings.Contains(e.Path, "/") {
			joliet = false
		}
		p := filepath.Join(ws, filepath.FromSlash(e.Path))
		if err := os.WriteFile(p, e.Data, isoFileMode); err != nil {
			tb.Fatal(err)
		}
	}
	mem := &memFile{max: maxImageBytes}
	fsys, err := iso9660.Create(file.New(mem, false), 0, 0, isoBlock, ws)
	if err != nil {
		tb.Fatalf("go-diskfs create: %v", err)
	}
	if err := fsys.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: joliet, VolumeIdentifier: spec.Label}); err != nil {
		tb.Fatalf("go-diskfs finalize: %v", err)
	}
	if len(mem.buf) < isoPVDOffset+isoBlock {
		tb.Fatalf("go-diskfs image of %d bytes", len(mem.buf))
	}
	size := int(binary.LittleEndian.Uint32(mem.buf[isoPVDOffset+80:])) * isoBlock
	if n := len(mem.buf); n < size { // the last block may be only partly written
		mem.buf = append(mem.buf, make([]byte, size-n)...)
	}
	img := mem.buf[:size]
	stamp, _ := Stamp(spec)
	if err := normalizeISO(img, stamp); err != nil {
		tb.Fatal(err)
	}
	return img
}

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

// collisionsInteract reports whether, in some directory of spec, two
// groups of colliding ISO short names could take each other's renumbered
// names (or one a name the other frees): then go-diskfs's names depend on
// the order its map yields the groups in. It is conservative: a group
// trying a name the other tried counts, even where a third sibling holds
// that name and the order makes no difference.
func collisionsInteract(spec Spec, dirs []string) bool {
	children := map[string][]*isoNode{}
	add := func(p string, isDir bool) {
		parent, base := ".", p
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			parent, base = p[:i], p[i+1:]
		}
		n := &isoNode{name: base, isDir: isDir}
		n.short, n.ext = isoShortName(base)
		children[parent] = append(children[parent], n)
	}
	for _, d := range dirs {
		add(d, true)
	}
	for _, e := range spec.Entries {
		add(e.Path, false)
	}
	for _, cs := range children {
		slices.SortFunc(cs, func(a, b *isoNode) int { return strings.Compare(a.name, b.name) })
		groups := map[string][]*isoNode{}
		var multi []string
		for _, c := range cs {
			k := c.collisionKey()
			groups[k] = append(groups[k], c)
			if len(groups[k]) == 2 {
				multi = append(multi, k)
			}
		}
		// the names each group tries when no other group has been renumbered
		tried := map[string]map[string]bool{}
		for _, k := range multi {
			members := groups[k]
			taken := map[string]bool{}
			for _, c := range cs {
				taken[c.collisionKey()] = true
			}
			ext := members[0].ext
			if members[0].isDir {
				ext = ""
			}
			seen := map[string]bool{}
			tried[k] = seen
			for digits, left := len(fmt.Sprint(len(members)-1)), len(members); digits < 8 && left > 0; digits++ {
				b := members[0].short[:min(len(members[0].short), 8-digits)]
				limit := 1
				for range digits {
					limit *= 10
				}
				left = len(members)
				for change := 0; change < limit && left > 0; change++ {
					cand := b + fmt.Sprintf("%0*d", digits, change)
					if ext != "" {
						cand += "." + ext
					}
					seen[cand] = true
					if !taken[cand] {
						taken[cand] = true
						left--
					}
				}
			}
		}
		for _, a := range multi {
			for _, b := range multi {
				if a == b {
					continue
				}
				if tried[a][b] {
					return true
				}
				for c := range tried[a] {
					if tried[b][c] {
						return true
					}
				}
			}
		}
	}
	return false
}

// interactingSpecs have groups of colliding short names that could take
// each other's names.
func interactingSpecs() map[string]Spec {
	one := func(names ...string) []Entry {
		var es []Entry
		for _, n := range names {
			es = append(es, Entry{Path: n, Data: []byte("1")})
		}
		return es
	}
	return map[string]Spec{
		"two groups":   {MediaISO, "cidata", fallbackEntries()},
		"nine names":   {MediaISO, "cidata", one("abcdefx", "abcdef.t", "abcdef100", "abcdefg01x.t", "abcdef", "abcdef10", "abcdef1g", "abcdef1ggx", "abcdef1")},
		"nested dirs":  {MediaISO, "config-2", one("openstack/abcdefgh1/a", "openstack/abcdefgh2/b", "openstack/abcdefg0/c", "openstack/abcdefg0x/d", "openstack/latest/meta_data.json")},
		"300 in a row": {MediaISO, "cidata", nFiles(300, func(i int) string { return fmt.Sprintf("file-%04d", i) }, func(i int) int { return 1 })},
	}
}

// TestCollisionOrderIsGoDiskfsWalkOrder: go-diskfs renumbers groups of
// colliding short names in Go map order (walkTree ranges over a map), so
// where groups interact its images differ from run to run and no recipe
// could count on one of them. The writer takes the groups in walk order:
// its image is one go-diskfs also builds (the one it builds when the map
// yields the groups in insertion order), and the same every time.
func TestCollisionOrderIsGoDiskfsWalkOrder(t *testing.T) {
	for name, spec := range interactingSpecs() {
		t.Run(name, func(t *testing.T) {
			dirs, err := validateSpec(spec)
			if err != nil {
				t.Fatal(err)
			}
			if !collisionsInteract(spec, dirs) {
				t.Fatal("the spec's collision groups do not interact")
			}
			want := layout(t, spec, isoLegacyJoliet)
			if again := layout(t, spec, isoLegacyJoliet); !bytes.Equal(again, want) {
				t.Fatalf("two layouts differ %s", firstDiff(again, want))
			}
			outcomes := map[string]int{}
			builds, same := 0, 0
			for builds < 400 && (same == 0 || len(outcomes) < 2 || builds < 40) {
				img := buildISODiskfs(t, spec, dirs)
				builds++
				outcomes[sha256Hex(img)]++
				if bytes.Equal(img, want) {
					same++
				}
				if name == "300 in a row" && len(outcomes) > 1 {
					break // the walk order of 34 groups is one of very many
				}
			}
			t.Logf("%d go-diskfs builds: %d distinct images, %d equal to the writer's", builds, len(outcomes), same)
			if len(outcomes) < 2 {
				t.Errorf("go-diskfs built the same image %d times; are its collisions reproducible after all?", builds)
			}
			if same == 0 && name != "300 in a row" {
				t.Errorf("none of %d go-diskfs builds is the writer's image", builds)
			}
		})
	}
}
