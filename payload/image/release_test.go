package image

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// Byte identity with released images (issue 33 item 5). Recipes record the
// sha256 of the image they describe, and a rebuild must give exactly those
// bytes, so the images of a release are a format. testdata/release holds
// specs with the sha256 their images had when the corpus was recorded (with
// the code of main at b426220, before issue 33 made the in-memory writer
// the only ISO producer): every image the current code builds must have
// them. legacy_sha256 is the pre-issue-14 Joliet layout Write accepts with
// Options.ExpectSHA256 (recipes recorded before that fix). The corpus is
// written once, with -update-release, by the code whose bytes it records;
// re-recording it with later code would prove nothing.

var updateRelease = flag.Bool("update-release", false, "rewrite testdata/release/images.json from the current code")

const releaseCorpus = "testdata/release/images.json"

// releaseData is one entry's bytes: Text when they are valid UTF-8,
// otherwise Base64, or Fill repeated N times for bulk content.
type releaseData struct {
	Path   string  `json:"path"`
	Text   *string `json:"text,omitempty"`
	Base64 []byte  `json:"base64,omitempty"`
	Fill   *byte   `json:"fill,omitempty"`
	N      int     `json:"n,omitempty"`
}

type releasedImage struct {
	Name         string        `json:"name"`
	Media        Media         `json:"media"`
	Label        string        `json:"label"`
	Entries      []releaseData `json:"entries"`
	SHA256       string        `json:"sha256"`
	Size         int64         `json:"size"`
	LegacySHA256 string        `json:"legacy_sha256,omitempty"`
}

func (r releasedImage) spec() Spec {
	s := Spec{Media: r.Media, Label: r.Label}
	for _, e := range r.Entries {
		var b []byte
		switch {
		case e.Text != nil:
			b = []byte(*e.Text)
		case e.Fill != nil:
			b = bytes.Repeat([]byte{*e.Fill}, e.N)
		default:
			b = e.Base64
		}
		s.Entries = append(s.Entries, Entry{Path: e.Path, Data: b})
	}
	return s
}

func releaseEntries(es []Entry) []releaseData {
	out := make([]releaseData, 0, len(es))
	for _, e := range es {
		d := releaseData{Path: e.Path}
		switch {
		case len(e.Data) >= 64 && bytes.Count(e.Data, e.Data[:1]) == len(e.Data):
			d.Fill, d.N = &e.Data[0], len(e.Data)
		case utf8.Valid(e.Data):
			s := string(e.Data)
			d.Text = &s
		default:
			d.Base64 = e.Data
		}
		out = append(out, d)
	}
	return out
}

func fill(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }

// releaseSpecs are the specs the corpus records: the renderer's golden
// examples as nocloud ISO, config-2 ISO and vfat, and the ISO writer's
// edge cases (Joliet cidata, the legacy Joliet layout, many files, long
// names, deep nesting, colliding short names).
func releaseSpecs(t *testing.T) []releasedImage {
	t.Helper()
	var out []releasedImage
	add := func(name string, s Spec) {
		out = append(out, releasedImage{Name: name, Media: s.Media, Label: s.Label, Entries: releaseEntries(s.Entries)})
	}
	golden := goldenSpecs(t)
	for _, name := range slices.Sorted(maps.Keys(golden)) {
		spec := golden[name]
		add("golden "+name+" iso", spec)
		if !strings.HasPrefix(name, "zz-large") { // vfat is go-diskfs's: a few suffice
			spec.Media = MediaVFAT
			add("golden "+name+" vfat", spec)
		}
	}
	long := strings.Repeat("n", maxNameLen)
	ce := cidataEntries()
	md, ud, nc := ce[0], ce[1], ce[2]
	many := func(n int, name func(i int) string, size func(i int) int) []Entry {
		es := make([]Entry, n)
		for i := range es {
			es[i] = Entry{Path: name(i), Data: fill(byte('a'+i%26), size(i))}
		}
		return es
	}
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"nocloud iso", Spec{MediaISO, "cidata", cidataEntries()}},
		{"config-2 iso", Spec{MediaISO, "config-2", config2Entries()}},
		{"nocloud vfat", Spec{MediaVFAT, "cidata", cidataEntries()}},
		{"nocloud vfat CIDATA", Spec{MediaVFAT, "CIDATA", cidataEntries()}},
		{"config-2 vfat", Spec{MediaVFAT, "config-2", config2Entries()}},
		{"legacy joliet: vendor-data empty", Spec{MediaISO, "cidata", []Entry{md, ud, nc, {"vendor-data", nil}}}},
		{"legacy joliet: vendor-data 2048", Spec{MediaISO, "cidata", []Entry{md, ud, nc, {"vendor-data", fill('v', 2048)}}}},
		{"legacy joliet: user-data 4096 last", Spec{MediaISO, "cidata", []Entry{md, {"user-data", fill('u', 4096)}, nc}}},
		{"joliet: user-data 2048 not last", Spec{MediaISO, "cidata", []Entry{md, {"user-data", fill('u', 2048)}, nc, {"vendor-data", []byte("#cloud-config\n{}\n")}}}},
		{"only empty file", Spec{MediaISO, "cidata", []Entry{{"meta-data", nil}}}},
		{"2047 bytes", Spec{MediaISO, "cidata", []Entry{{"a", fill('x', 2047)}}}},
		{"2049 bytes", Spec{MediaISO, "cidata", []Entry{{"a", fill('x', 2049)}, {"b", []byte("x")}}}},
		{"empty last nested", Spec{MediaISO, "config-2", append(config2Entries(), Entry{"openstack/zz/zz", nil})}},
		{"4096 last nested", Spec{MediaISO, "config-2", []Entry{{"a/a", []byte("x")}, {"z/z", fill('z', 4096)}}}},
		{"many files joliet", Spec{MediaISO, "cidata", many(300, func(i int) string { return fmt.Sprintf("%04d-file.txt", i) }, func(i int) int { return i % 97 })}},
		{"many files joliet 2048 last", Spec{MediaISO, "cidata", many(120, func(i int) string { return fmt.Sprintf("f%03d", i) }, func(i int) int { return []int{0, 1, 2047, 2048, 2049}[i%5] })}},
		{"many nested", Spec{MediaISO, "config-2", many(200, func(i int) string { return fmt.Sprintf("d%d/sub-%d/f%03d", i%7, i%3, i) }, func(i int) int { return i % 61 })}},
		{"many files vfat", Spec{MediaVFAT, "cidata", many(60, func(i int) string { return fmt.Sprintf("file-%02d.txt", i) }, func(i int) int { return i * 31 })}},
		{"long names", Spec{MediaISO, "cidata", []Entry{{long, []byte("1")}, {long[:63] + "m", []byte("2")}, {"x." + long[:62], nil}}}},
		{"long nested", Spec{MediaISO, "config-2", []Entry{{long + "/" + long + "/" + long, []byte("1")}}}},
		{"deep nesting", Spec{MediaISO, "config-2", []Entry{{"a/b/c/d/e/f/g/h", []byte("deep")}, {"a/b/c/x", nil}, {"a/y", []byte("y")}}}},
		{"max label", Spec{MediaISO, strings.Repeat("L", MaxISOLabel), cidataEntries()}},
		{"label punctuation", Spec{MediaISO, "a b~!@#$%^&*()_+{}|:<>?`-=[];'./", cidataEntries()[:1]}},
		{"sorted oddly", Spec{MediaISO, "cidata", []Entry{{"Zeta", nil}, {"alpha", nil}, {"_x", nil}, {"0", nil}, {"a.b.c", nil}, {"a-b", nil}, {"A_B.x", nil}, {"~t", nil}, {".hidden", nil}}}},
		{"raw vs iso order", Spec{MediaISO, "config-2", []Entry{{"b.z/1", nil}, {"b/2", nil}, {"b_/3", nil}, {"B-/4", nil}, {"a.c", nil}, {"a_c", nil}}}},
		{"collisions", Spec{MediaISO, "config-2", []Entry{{"openstack/latest/vendor_data.json", []byte("{}")}, {"openstack/latest/vendor_data2.json", []byte("{}")}, {"openstack/latest/vendor_dataX.json", nil}}}},
		{"collision dir+file", Spec{MediaISO, "config-2", []Entry{{"a.b/x", nil}, {"a.c/y", nil}, {"a", nil}, {"a.", nil}}}},
		{"ten-way collision", Spec{MediaISO, "cidata", many(12, func(i int) string { return fmt.Sprintf("longname%c.txt", 'a'+i) }, func(i int) int { return 1 })}},
		{"dots and exts", Spec{MediaISO, "cidata", []Entry{{"a.", nil}, {"a..b", nil}, {".a", nil}, {"x.tar.gz", nil}, {"x.tar.bz2", nil}}}},
		{"large file", Spec{MediaISO, "cidata", append(cidataEntries(), Entry{"big.bin", fill('B', 3<<20)})}},
		{"large file vfat", Spec{MediaVFAT, "cidata", append(cidataEntries(), Entry{"big.bin", fill('B', 3<<20)})}},
		{"vfat nested config-2 2048", Spec{MediaVFAT, "config-2", []Entry{{"openstack/latest/meta_data.json", []byte("{}")}, {"openstack/latest/user_data", fill('u', 2048)}, {"openstack/2012-08-10/meta_data.json", nil}}}},
	} {
		add(c.name, c.spec)
	}
	return out
}

// legacyImage returns the pre-issue-14 Joliet layout of an ISO spec.
func legacyImage(t *testing.T, spec Spec) []byte {
	t.Helper()
	dirs, err := validateSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	img, err := buildISO(context.Background(), spec, dirs, isoLegacyJoliet)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func writeRelease(t *testing.T) {
	imgs := releaseSpecs(t)
	dir := t.TempDir()
	for i := range imgs {
		r := &imgs[i]
		spec := r.spec()
		out := filepath.Join(dir, fmt.Sprintf("%d.img", i))
		info, err := Write(context.Background(), spec, out, Options{GID: -1, NoSync: true, ISOLayout: ISOLayoutGoDiskfs})
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		r.SHA256, r.Size = info.SHA256, info.Size
		if spec.Media == MediaISO {
			if s := sha256Hex(legacyImage(t, spec)); s != r.SHA256 {
				r.LegacySHA256 = s
			}
		}
	}
	b, err := json.MarshalIndent(imgs, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(releaseCorpus), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(releaseCorpus, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func loadRelease(t *testing.T) []releasedImage {
	t.Helper()
	b, err := os.ReadFile(releaseCorpus)
	if err != nil {
		t.Fatal(err)
	}
	var imgs []releasedImage
	if err := json.Unmarshal(b, &imgs); err != nil {
		t.Fatalf("%s: %v", releaseCorpus, err)
	}
	if len(imgs) < 50 {
		t.Fatalf("%s holds %d images; the corpus is incomplete", releaseCorpus, len(imgs))
	}
	return imgs
}

// TestReleaseImagesRebuild: every image of the corpus builds to its
// recorded bytes (sha256 and size) in the layout it was recorded in
// (ISOLayoutGoDiskfs, which a recipe without iso-layout names), with and
// without ExpectSHA256, and an image recorded in the legacy Joliet layout
// rebuilds to those bytes with ExpectSHA256, as a recipe's rebuild asks.
func TestReleaseImagesRebuild(t *testing.T) {
	if *updateRelease {
		writeRelease(t)
	}
	imgs := loadRelease(t)
	legacy := 0
	for _, r := range imgs {
		t.Run(r.Name, func(t *testing.T) {
			spec := r.spec()
			dir := t.TempDir()
			out := filepath.Join(dir, "new.img")
			info, err := Write(context.Background(), spec, out, Options{GID: -1, NoSync: true, ISOLayout: ISOLayoutGoDiskfs})
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if info.SHA256 != r.SHA256 || info.Size != r.Size || fileSHA(t, out) != r.SHA256 {
				t.Errorf("built sha256 %s (%d bytes), the release built %s (%d bytes)", info.SHA256, info.Size, r.SHA256, r.Size)
			}
			expects := []string{r.SHA256}
			if r.LegacySHA256 != "" {
				legacy++
				expects = append(expects, r.LegacySHA256)
			}
			for _, want := range expects {
				p := filepath.Join(dir, want[:12]+".img")
				info, err := Write(context.Background(), spec, p, Options{GID: -1, NoSync: true, ExpectSHA256: want, ISOLayout: ISOLayoutGoDiskfs})
				if err != nil {
					t.Errorf("Write with ExpectSHA256 %s: %v", want, err)
					continue
				}
				if got := fileSHA(t, p); got != want || info.SHA256 != want {
					t.Errorf("Write with ExpectSHA256 %s wrote %s (info %s)", want, got, info.SHA256)
				}
			}
		})
	}
	if legacy < 3 {
		t.Errorf("only %d corpus images have a legacy Joliet layout", legacy)
	}
}
