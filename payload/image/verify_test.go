package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func builtImage(t *testing.T, spec Spec) []byte {
	t.Helper()
	dirs, err := validateSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	var img []byte
	if spec.Media == MediaISO {
		img, err = buildISO(context.Background(), spec, dirs, specVariant(spec))
	} else {
		img, err = buildVFAT(context.Background(), spec, dirs)
	}
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// specVariant is the ISO variant Write builds spec in: isoJolietTree, or
// for a spec whose names Joliet cannot hold (random specs), isoCurrent.
func specVariant(spec Spec) isoVariant {
	if validateJoliet(spec) != nil {
		return isoCurrent
	}
	return isoJolietTree
}

func TestReadBack(t *testing.T) {
	img := builtImage(t, Spec{MediaISO, "cidata", append(cidataEntries(), Entry{"big", bigData(600 << 10)})})
	flipped := bytes.Clone(img)
	flipped[len(img)-3] ^= 1
	cases := []struct {
		name    string
		disk    []byte // nil: no file
		wantErr string
	}{
		{"same bytes", img, ""},
		{"one byte differs", flipped, "differ from the built image"},
		{"truncated", img[:len(img)-isoBlock], "bytes, the built image has"},
		{"longer", append(bytes.Clone(img), 0), "longer than"},
		{"missing", nil, "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "img")
			if tc.disk != nil {
				if err := os.WriteFile(p, tc.disk, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := readBack(p, img)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("readBack: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want ErrVerify saying %q", err, tc.wantErr)
			}
			if tc.disk == nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("err = %v does not wrap fs.ErrNotExist", err)
			}
		})
	}
}

// corrupt returns a copy of img with the first occurrence of old replaced by
// new (same length).
func corrupt(t *testing.T, img []byte, old, new string) []byte {
	t.Helper()
	i := bytes.Index(img, []byte(old))
	if i < 0 || len(old) != len(new) {
		t.Fatalf("%q not in image", old)
	}
	c := bytes.Clone(img)
	copy(c[i:], new)
	return c
}

func TestCheckImageFindsMismatches(t *testing.T) {
	for _, media := range []Media{MediaISO, MediaVFAT} {
		for _, base := range []Spec{{media, "cidata", cidataEntries()}, {media, "config-2", config2Entries()}} {
			img := builtImage(t, base)
			if info, err := checkImage(img, base, specVariant(base)); err != nil || info.Label != base.Label || len(info.Files) != len(base.Entries) || info.Size != int64(len(img)) {
				t.Fatalf("%s %s: checkImage = %+v, %v", media, base.Label, info, err)
			}
			otherLabel := base
			otherLabel.Label = "other"
			extra := base
			extra.Entries = append(slices.Clone(base.Entries), Entry{"extra", nil})
			fewer := base
			fewer.Entries = base.Entries[1:]
			changed := base
			changed.Entries = slices.Clone(base.Entries)
			d := bytes.Clone(changed.Entries[0].Data)
			d[0] ^= 1
			changed.Entries[0].Data = d
			cases := []struct {
				name    string
				img     []byte
				spec    Spec
				wantErr string
			}{
				{"other label", img, otherLabel, "label"},
				{"extra entry", img, extra, "files ["},
				{"missing entry", img, fewer, "files ["},
				{"changed bytes", img, changed, "differ from the"},
				{"image file bytes changed", corrupt(t, img, string(base.Entries[0].Data[:8]), "XXXXXXXX"), base, "differ from the"},
				{"image truncated", img[:len(img)/2], base, ""},
			}
			if media == MediaISO {
				name := base.Entries[1].Path[strings.LastIndexByte(base.Entries[1].Path, '/')+1:]
				cases = append(cases,
					struct {
						name    string
						img     []byte
						spec    Spec
						wantErr string
					}{"image name changed", corrupt(t, img, "NM"+string([]byte{byte(5 + len(name)), 1, 0})+name, "NM"+string([]byte{byte(5 + len(name)), 1, 0})+"Z"+name[1:]), base, "Joliet tree of the built image: lacks"},
					struct {
						name    string
						img     []byte
						spec    Spec
						wantErr string
					}{"Joliet name changed", corrupt(t, img, string(ucs2(name)), string(ucs2("Z"+name[1:]))), base, "Joliet tree of the built image: lists"},
					struct {
						name    string
						img     []byte
						spec    Spec
						wantErr string
					}{"image label changed", corrupt(t, img, base.Label, "X"+base.Label[1:]), base, "label"},
				)
			}
			for _, tc := range cases {
				t.Run(string(media)+"/"+base.Label+"/"+tc.name, func(t *testing.T) {
					_, err := checkImage(tc.img, tc.spec, specVariant(tc.spec))
					if !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("err = %v, want ErrVerify saying %q", err, tc.wantErr)
					}
				})
			}
		}
	}
}

// The package's ISO reader (Inspect, ReadFile, checkImage) must agree with
// real tools on the label (isoinfo -d) and on the file list and bytes
// (xorriso's extraction), for the examples and random specs with odd names.
func TestISOReaderAgreesWithRealTools(t *testing.T) {
	needTool(t, "xorriso", "xorriso")
	needTool(t, "isoinfo", "genisoimage")
	specs := []Spec{{MediaISO, "cidata", cidataEntries()}, {MediaISO, "config-2", config2Entries()}}
	for _, s := range goldenSpecs(t) {
		specs = append(specs, s)
	}
	r := rand.New(rand.NewPCG(7, 14))
	for len(specs) < 60 {
		if s := randomSpec(r); !hasInvalid(s) {
			specs = append(specs, s)
		}
	}
	dir := t.TempDir()
	for i, spec := range specs {
		img := builtImage(t, spec)
		v, err := readISOBytes(img)
		if err != nil {
			t.Fatalf("spec %d: readISOBytes: %v", i, err)
		}
		label, files := v.label, map[string][]byte{}
		for _, f := range v.files {
			if files[f.path], err = v.data(f); err != nil {
				t.Fatal(err)
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("%d.iso", i))
		if err := os.WriteFile(p, img, 0o600); err != nil {
			t.Fatal(err)
		}
		if d := run(t, "isoinfo", "-d", "-i", p); !strings.Contains(d, "Volume id: "+label+"\n") {
			t.Errorf("spec %d: the reader reads label %q, isoinfo -d:\n%s", i, label, d)
		}
		ext := filepath.Join(dir, fmt.Sprint(i))
		run(t, "xorriso", "-osirrox", "on", "-indev", p, "-extract", "/", ext)
		tree := treeFiles(t, ext)
		if len(tree) != len(files) {
			t.Errorf("spec %d: the reader lists %d files, xorriso extracts %d", i, len(files), len(tree))
		}
		for name, b := range tree {
			if got, ok := files[name]; !ok || !bytes.Equal(got, b) {
				t.Errorf("spec %d: %q: the reader has %d bytes (listed %v), xorriso extracts %d", i, name, len(got), ok, len(b))
			}
		}
	}
}

func hasInvalid(s Spec) bool {
	_, err := validateSpec(s)
	return err != nil
}
