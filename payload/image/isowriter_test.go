package image

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The ISO writer's legacy layout (isoLegacyJoliet) must give exactly the
// bytes of go-diskfs v1.9.4 plus normalizeISO (buildISODiskfs, the oracle
// in iso_oracle_test.go); its current layout (isoCurrent) the same bytes
// except for the Joliet root of the specs jolietQuirk reports. Real tools
// judge the images elsewhere (write_test.go, joliet_test.go,
// inspect_test.go, the cloud-init judge in package payload).

// layout runs the writer alone.
func layout(tb testing.TB, spec Spec, v isoVariant) []byte {
	tb.Helper()
	dirs, err := validateSpec(spec)
	if err != nil {
		tb.Fatalf("validateSpec: %v", err)
	}
	t, _ := Stamp(spec)
	img, err := layoutISO(spec, dirs, t, v)
	if err != nil {
		tb.Fatalf("layoutISO: %v", err)
	}
	return img
}

// sameAsDiskfs fails unless the writer's legacy layout and go-diskfs agree
// on spec byte for byte, and the current layout is the same image with
// (for specs jolietQuirk reports, only) the first block of the Joliet root
// written. It returns false, comparing nothing, for a spec whose colliding
// short names go-diskfs renumbers in an order that varies from run to run
// (see TestCollisionOrderIsGoDiskfsWalkOrder).
func sameAsDiskfs(tb testing.TB, spec Spec) bool {
	tb.Helper()
	dirs, err := validateSpec(spec)
	if err != nil {
		tb.Fatalf("validateSpec: %v", err)
	}
	if collisionsInteract(spec, dirs) {
		return false
	}
	want := buildISODiskfs(tb, spec, dirs)
	got := layout(tb, spec, isoLegacyJoliet)
	cur := layout(tb, spec, isoCurrent)
	sameAsLegacyExceptJoliet(tb, spec, dirs, cur, want)
	if !bytes.Equal(got, want) {
		tb.Errorf("in-memory image (%d bytes) differs from go-diskfs's (%d bytes) %s; spec %s", len(got), len(want), firstDiff(got, want), describeSpec(spec))
		if dir := os.Getenv("VMPAYLOAD_ISO_DIFF_DIR"); dir != "" {
			_ = os.WriteFile(filepath.Join(dir, "got.iso"), got, 0o644)
			_ = os.WriteFile(filepath.Join(dir, "want.iso"), want, 0o644)
		}
	}
	// normalizeISO must find nothing left to normalise.
	again := bytes.Clone(got)
	t, _ := Stamp(spec)
	if err := normalizeISO(again, t); err != nil {
		tb.Errorf("normalizeISO on the in-memory image: %v", err)
	} else if !bytes.Equal(again, got) {
		tb.Errorf("normalizeISO changed the in-memory image %s", firstDiff(again, got))
	}
	return true
}

// sameAsLegacyExceptJoliet fails unless the current-layout image cur of
// spec equals the legacy image legacy (go-diskfs's), except, when the spec
// is affected by the Joliet quirk, in the first block of the Joliet root:
// there legacy is zero and cur is not (real readers judge what it holds,
// TestJolietRootListsFiles).
func sameAsLegacyExceptJoliet(tb testing.TB, spec Spec, dirs []string, cur, legacy []byte) {
	tb.Helper()
	l, err := planISO(spec, dirs, isoCurrent)
	if err != nil {
		tb.Fatal(err)
	}
	if !l.jolietQuirk() {
		if !bytes.Equal(cur, legacy) {
			tb.Errorf("spec unaffected by the Joliet quirk: the current layout differs from go-diskfs's %s; spec %s", firstDiff(cur, legacy), describeSpec(spec))
		}
		return
	}
	j := int(l.root.jLoc) * isoBlock
	if !bytes.Equal(cur[:j], legacy[:j]) || !bytes.Equal(cur[j+isoBlock:], legacy[j+isoBlock:]) {
		tb.Errorf("spec affected by the Joliet quirk: the current layout differs from go-diskfs's outside the Joliet root's first block (%d) %s; spec %s", l.root.jLoc, firstDiff(cur, legacy), describeSpec(spec))
	}
	if slices.ContainsFunc(legacy[j:j+isoBlock], func(b byte) bool { return b != 0 }) {
		tb.Errorf("go-diskfs's image has a Joliet root at block %d; is the quirk gone? spec %s", l.root.jLoc, describeSpec(spec))
	}
	if !slices.ContainsFunc(cur[j:j+isoBlock], func(b byte) bool { return b != 0 }) {
		tb.Errorf("the current layout kept the zeroed Joliet root; spec %s", describeSpec(spec))
	}
}

func firstDiff(a, b []byte) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("first at byte %d (block %d +%d): got %#02x want %#02x", i, i/isoBlock, i%isoBlock, a[i], b[i])
		}
	}
	return fmt.Sprintf("in length only")
}

func describeSpec(s Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "label %q:", s.Label)
	for _, e := range s.Entries {
		fmt.Fprintf(&b, " %s(%d)", e.Path, len(e.Data))
	}
	return b.String()
}

// goldenSpecs are the specs of every rendered example in package payload
// (its golden documents are exactly the image entries).
func goldenSpecs(t *testing.T) map[string]Spec {
	t.Helper()
	root := filepath.Join("..", "testdata", "golden")
	ds, err := os.ReadDir(root)
	if err != nil || len(ds) == 0 {
		t.Fatalf("read golden examples %s: %v (%d)", root, err, len(ds))
	}
	out := map[string]Spec{}
	for _, d := range ds {
		dir := filepath.Join(root, d.Name())
		spec := Spec{Media: MediaISO, Label: "cidata"}
		err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			spec.Entries = append(spec.Entries, Entry{Path: filepath.ToSlash(rel), Data: b})
			if strings.HasPrefix(rel, "openstack") {
				spec.Label = "config-2"
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		out[d.Name()] = spec
	}
	return out
}

func TestLayoutISOMatchesDiskfsOnExamples(t *testing.T) {
	specs := goldenSpecs(t)
	specs["helpers cidata"] = Spec{MediaISO, "cidata", cidataEntries()}
	specs["helpers config-2"] = Spec{MediaISO, "config-2", config2Entries()}
	specs["large file"] = Spec{MediaISO, "cidata", append(cidataEntries(), Entry{"big.bin", bigData(3 << 20)})}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			if !sameAsDiskfs(t, spec) {
				t.Errorf("spec has interacting short-name collisions; the renderer's specs must not")
			}
		})
	}
}

func nFiles(n int, name func(i int) string, size func(i int) int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		es[i] = Entry{Path: name(i), Data: bytes.Repeat([]byte{byte('a' + i%26)}, size(i))}
	}
	return es
}

func TestLayoutISOMatchesDiskfsEdgeCases(t *testing.T) {
	long := strings.Repeat("n", maxNameLen)
	cases := map[string]Spec{
		"empty file":           {MediaISO, "cidata", []Entry{{"meta-data", nil}, {"user-data", []byte("x")}}},
		"only empty file":      {MediaISO, "cidata", []Entry{{"meta-data", nil}}},
		"empty last joliet":    {MediaISO, "cidata", append(cidataEntries()[:3], Entry{"vendor-data", nil})},
		"empty last nested":    {MediaISO, "config-2", append(config2Entries(), Entry{"openstack/zz/zz", nil})},
		"2048 bytes":           {MediaISO, "cidata", []Entry{{"a", make([]byte, 2048)}, {"b", []byte("x")}}},
		"2048 last joliet":     {MediaISO, "cidata", []Entry{{"a", []byte("x")}, {"z", make([]byte, 2048)}}},
		"2048 last nested":     {MediaISO, "config-2", []Entry{{"a/a", []byte("x")}, {"z/z", make([]byte, 4096)}}},
		"2049 bytes":           {MediaISO, "cidata", []Entry{{"a", make([]byte, 2049)}, {"b", []byte("x")}}},
		"2047 bytes":           {MediaISO, "cidata", []Entry{{"a", make([]byte, 2047)}}},
		"many files":           {MediaISO, "cidata", nFiles(300, func(i int) string { return fmt.Sprintf("%04d-file.txt", i) }, func(i int) int { return i * 7 })},
		"many nested":          {MediaISO, "config-2", nFiles(200, func(i int) string { return fmt.Sprintf("d%d/sub-%d/f%03d", i%7, i%3, i) }, func(i int) int { return i })},
		"long names":           {MediaISO, "cidata", []Entry{{long, []byte("1")}, {long[:63] + "m", []byte("2")}, {"x." + long[:62], nil}}},
		"long nested":          {MediaISO, "config-2", []Entry{{long + "/" + long + "/" + long, []byte("1")}}},
		"deep nesting":         {MediaISO, "config-2", []Entry{{"a/b/c/d/e/f/g/h", []byte("deep")}, {"a/b/c/x", nil}, {"a/y", []byte("y")}}},
		"max label":            {MediaISO, strings.Repeat("L", MaxISOLabel), cidataEntries()},
		"label punctuation":    {MediaISO, "a b~!@#$%^&*()_+{}|:<>?`-=[];'./", cidataEntries()[:1]},
		"sorted oddly":         {MediaISO, "cidata", []Entry{{"Zeta", nil}, {"alpha", nil}, {"_x", nil}, {"0", nil}, {"a.b.c", nil}, {"a-b", nil}, {"A_B.x", nil}, {"~t", nil}, {".hidden", nil}}},
		"raw vs iso order":     {MediaISO, "config-2", []Entry{{"b.z/1", nil}, {"b/2", nil}, {"b_/3", nil}, {"B-/4", nil}, {"a.c", nil}, {"a_c", nil}}},
		"collisions":           {MediaISO, "config-2", []Entry{{"openstack/latest/vendor_data.json", nil}, {"openstack/latest/vendor_data2.json", nil}, {"openstack/latest/vendor_dataX.json", nil}}},
		"collision dir+file":   {MediaISO, "config-2", []Entry{{"a.b/x", nil}, {"a.c/y", nil}, {"a", nil}, {"a.", nil}}},
		"ten-way collision":    {MediaISO, "cidata", nFiles(12, func(i int) string { return fmt.Sprintf("longname%c.txt", 'a'+i) }, func(i int) int { return 1 })},
		"dots and exts":        {MediaISO, "cidata", []Entry{{"a.", nil}, {"a..b", nil}, {".a", nil}, {"x.tar.gz", nil}, {"x.tar.bz2", nil}}},
		"files of every size":  {MediaISO, "cidata", nFiles(40, func(i int) string { return fmt.Sprintf("s%02d", i) }, func(i int) int { return []int{0, 1, 2047, 2048, 2049, 4096}[i%6] })},
		"nested 2048 and zero": {MediaISO, "config-2", nFiles(30, func(i int) string { return fmt.Sprintf("d%d/s%02d", i%4, i) }, func(i int) int { return []int{0, 2048, 5}[i%3] })},
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			if !sameAsDiskfs(t, spec) {
				t.Errorf("spec has interacting short-name collisions")
			}
		})
	}
}

// randomSpec draws a valid ISO spec: names from a small alphabet (so ISO
// short names collide), nesting, sizes around block boundaries.
func randomSpec(r *rand.Rand) Spec {
	alphabet := "abAB_-.0~x"
	name := func() string {
		n := 1 + r.IntN(12)
		if r.IntN(10) == 0 {
			n = 1 + r.IntN(maxNameLen)
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		s := string(b)
		if s == "." || s == ".." {
			s = "dot"
		}
		return s
	}
	size := func() int {
		switch r.IntN(6) {
		case 0:
			return 0
		case 1:
			return isoBlock*(1+r.IntN(3)) + r.IntN(3) - 1
		case 2:
			return r.IntN(20000)
		}
		return r.IntN(300)
	}
	nested := r.IntN(2) == 0
	var dirs []string
	if nested {
		for range 1 + r.IntN(6) {
			d := name()
			if len(dirs) > 0 && r.IntN(2) == 0 {
				d = dirs[r.IntN(len(dirs))] + "/" + d
			}
			if strings.Count(d, "/") < 6 {
				dirs = append(dirs, d)
			}
		}
	}
	spec := Spec{Media: MediaISO, Label: "cidata"}
	if r.IntN(4) == 0 {
		spec.Label = strings.Repeat("v", 1+r.IntN(MaxISOLabel))
	}
	used := map[string]bool{}
	for _, d := range dirs {
		for p := d; ; {
			used[p] = true
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
	n := 1 + r.IntN(30)
	for range n {
		p := name()
		if len(dirs) > 0 && r.IntN(5) != 0 {
			p = dirs[r.IntN(len(dirs))] + "/" + p
		}
		if used[p] {
			continue
		}
		used[p] = true
		spec.Entries = append(spec.Entries, Entry{Path: p, Data: bytes.Repeat([]byte{byte(r.IntN(256))}, size())})
	}
	if len(spec.Entries) == 0 {
		spec.Entries = []Entry{{"meta-data", nil}}
	}
	if nested && !strings.Contains(spec.Entries[0].Path, "/") {
		spec.Entries = append(spec.Entries, Entry{Path: "zz/last", Data: []byte("x")})
	}
	return spec
}

// hasCollision reports whether two entries (files or directories) of a
// directory of spec share an ISO short name before renumbering.
func hasCollision(spec Spec) bool {
	seen := map[string]bool{}
	add := func(p string, dir bool) bool {
		parent, base := ".", p
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			parent, base = p[:i], p[i+1:]
		}
		n := &isoNode{name: base, isDir: dir}
		n.short, n.ext = isoShortName(base)
		if dir {
			n.ext = ""
		}
		k := parent + "/" + n.collisionKey()
		if seen[k] {
			return true
		}
		seen[k] = true
		return false
	}
	dirs, _ := validateSpec(spec)
	for _, d := range dirs {
		if add(d, true) {
			return true
		}
	}
	for _, e := range spec.Entries {
		if add(e.Path, false) {
			return true
		}
	}
	return false
}

func TestLayoutISOMatchesDiskfsRandom(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 200
	}
	r := rand.New(rand.NewPCG(14, 2026))
	interacting, collisions, quirks := 0, 0, 0
	for i := range n {
		spec := randomSpec(r)
		dirs, err := validateSpec(spec)
		if err != nil {
			continue // a drawn name clashed with a directory
		}
		if !sameAsDiskfs(t, spec) {
			interacting++
		} else if l, _ := planISO(spec, dirs, isoCurrent); l.jolietQuirk() {
			quirks++
		}
		if hasCollision(spec) {
			collisions++
		}
		if t.Failed() {
			t.Fatalf("random spec %d failed", i)
		}
	}
	if interacting > n/20 {
		t.Errorf("%d of %d random specs have interacting collisions; the draw compares too few with go-diskfs", interacting, n)
	}
	if collisions < n/20 {
		t.Errorf("only %d of %d random specs have colliding short names; the draw no longer exercises renumbering", collisions, n)
	}
	if quirks < n/100 {
		t.Errorf("only %d of %d random specs have the Joliet quirk; the draw no longer exercises the legacy layout", quirks, n)
	}
	t.Logf("%d of %d random specs with interacting collisions, %d with colliding short names, %d with the Joliet quirk", interacting, n, collisions, quirks)
}

// FuzzLayoutISO compares the in-memory writer with go-diskfs on a random
// spec drawn from seed plus one entry whose path and size the fuzzer picks.
func FuzzLayoutISO(f *testing.F) {
	f.Add(uint64(1), "meta-data", uint16(0))
	f.Add(uint64(2026), "openstack/latest/vendor_data2.json", uint16(2048))
	f.Add(uint64(14), "a.b.c/D~E", uint16(4097))
	f.Fuzz(func(t *testing.T, seed uint64, path string, size uint16) {
		spec := randomSpec(rand.New(rand.NewPCG(seed, 14)))
		extra := append(spec.Entries, Entry{Path: path, Data: bytes.Repeat([]byte{'z'}, int(size))})
		if _, err := validateSpec(Spec{spec.Media, spec.Label, extra}); err == nil {
			spec.Entries = extra
		}
		sameAsDiskfs(t, spec)
	})
}
