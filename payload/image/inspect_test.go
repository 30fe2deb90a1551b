package image

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// writeTree puts entries under dir as plain files.
func writeTree(t testing.TB, dir string, entries []Entry) {
	t.Helper()
	for _, e := range entries {
		p := filepath.Join(dir, filepath.FromSlash(e.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, e.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Images produced by real tools must be read correctly by our reader.
func TestInspectForeignImages(t *testing.T) {
	needTool(t, "genisoimage", "genisoimage")
	needTool(t, "mkfs.vfat", "dosfstools")
	needTool(t, "mcopy", "mtools")
	t.Setenv("MTOOLS_SKIP_CHECK", "1")

	mkISO := func(args ...string) func(t *testing.T, src, img string) {
		return func(t *testing.T, src, img string) {
			run(t, "genisoimage", append(append([]string{"-quiet", "-o", img}, args...), src)...)
		}
	}
	mkFAT := func(label string, mkfsArgs ...string) func(t *testing.T, src, img string) {
		return func(t *testing.T, src, img string) {
			run(t, "mkfs.vfat", append(append([]string{"-C", "-n", label}, mkfsArgs...), img, "40960")...)
			es, err := os.ReadDir(src)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				run(t, "mcopy", "-s", "-i", img, filepath.Join(src, e.Name()), "::/")
			}
		}
	}
	cases := []struct {
		name    string
		entries []Entry
		make    func(t *testing.T, src, img string)
		fstype  string
		label   string
	}{
		{"genisoimage -J -r cidata", cidataEntries(), mkISO("-J", "-r", "-V", "cidata"), FSTypeISO9660, "cidata"},
		{"genisoimage nova config-2", config2Entries(), mkISO("-ldots", "-allow-lowercase", "-allow-multidot", "-l", "-J", "-r", "-V", "config-2"), FSTypeISO9660, "config-2"},
		{"genisoimage -iso-level 3 -R", cidataEntries(), mkISO("-iso-level", "3", "-J", "-R", "-V", "cidata"), FSTypeISO9660, "cidata"},
		{"genisoimage -J without Rock Ridge", cidataEntries(), mkISO("-J", "-V", "cidata"), FSTypeISO9660, "cidata"},
		{"genisoimage -J nested without Rock Ridge", config2Entries(), mkISO("-J", "-V", "config-2"), FSTypeISO9660, "config-2"},
		{"mkfs.vfat FAT12 cidata", cidataEntries(), mkFAT("CIDATA", "-F", "12"), FSTypeVFAT, "CIDATA"},
		{"mkfs.vfat FAT16 config-2", config2Entries(), mkFAT("config-2", "-F", "16"), FSTypeVFAT, "config-2"},
		{"mkfs.vfat FAT32 cidata", cidataEntries(), mkFAT("cidata", "-F", "32"), FSTypeVFAT, "cidata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := t.TempDir()
			writeTree(t, src, tc.entries)
			img := filepath.Join(t.TempDir(), "foreign.img")
			tc.make(t, src, img)

			info, err := Inspect(img)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if info.FSType != tc.fstype || info.Label != tc.label {
				t.Errorf("FSType %q Label %q, want %q %q", info.FSType, info.Label, tc.fstype, tc.label)
			}
			if info.SHA256 != fileSHA(t, img) {
				t.Error("SHA256 does not match the file")
			}
			want := map[string]int64{}
			for _, e := range tc.entries {
				want[e.Path] = int64(len(e.Data))
			}
			if len(info.Files) != len(want) {
				t.Errorf("Files = %v, want %d files", info.Files, len(want))
			}
			for _, f := range info.Files {
				if size, ok := want[f.Path]; !ok || size != f.Size {
					t.Errorf("file %+v not expected (want size %d, listed %v)", f, size, ok)
				}
			}
			for _, e := range tc.entries {
				b, err := ReadFile(img, e.Path)
				if err != nil || !bytes.Equal(b, e.Data) {
					t.Errorf("ReadFile(%q): %d bytes, %v", e.Path, len(b), err)
				}
			}
			if _, err := ReadFile(img, "no-such-file"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("ReadFile(missing) error %v, want fs.ErrNotExist", err)
			}
		})
	}
}

// Inspect must return an error, not panic, on files that are not images.
func TestInspectGarbage(t *testing.T) {
	iso := filepath.Join(t.TempDir(), "ok.iso")
	if _, err := Write(context.Background(), Spec{MediaISO, "config-2", config2Entries()}, iso, Options{GID: -1}); err != nil {
		t.Fatal(err)
	}
	vfat := filepath.Join(t.TempDir(), "ok.img")
	if _, err := Write(context.Background(), Spec{MediaVFAT, "cidata", cidataEntries()}, vfat, Options{GID: -1}); err != nil {
		t.Fatal(err)
	}
	isoBytes, _ := os.ReadFile(iso)
	fatBytes, _ := os.ReadFile(vfat)
	corrupt := func(b []byte, off int, v byte) []byte {
		c := bytes.Clone(b)
		c[off] = v
		return c
	}
	cases := []struct {
		name    string
		data    []byte
		wantErr bool // false: damage the reader may legitimately ignore
	}{
		{"empty", nil, true},
		{"text", []byte("#cloud-config\n"), true},
		{"zeros 64k", make([]byte, 64<<10), true},
		{"random 100k", bigData(100 << 10), true},
		{"iso truncated after PVD", isoBytes[:isoPVDOffset+isoBlock], true},
		{"iso truncated mid", isoBytes[:len(isoBytes)/2], true},
		{"iso bad root extent", corrupt(isoBytes, isoPVDOffset+156+2, 0xff), true},
		{"iso bad volume size", corrupt(isoBytes, isoPVDOffset+83, 0x7f), false},
		{"fat truncated", fatBytes[:4096], true},
		{"fat zero sectors/cluster", corrupt(fatBytes, 13, 0), true},
		{"fat huge root entries", corrupt(fatBytes, 18, 0xff), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "garbage")
			if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Inspect(p)
			if tc.wantErr && !errors.Is(err, ErrUnknownFormat) {
				t.Errorf("Inspect error %v, want ErrUnknownFormat", err)
			}
			_, _ = ReadFile(p, "meta-data")
		})
	}
	if _, err := Inspect(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Inspect(missing) = %v, want fs.ErrNotExist", err)
	}
	if _, err := Inspect(t.TempDir()); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("Inspect(dir) = %v, want ErrUnknownFormat", err)
	}
	for _, p := range []string{filepath.Join(t.TempDir(), "x")} {
		_ = os.WriteFile(p, []byte("hello"), 0o644)
		if _, err := Inspect(p); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("Inspect(text) = %v, want ErrUnknownFormat", err)
		}
	}
}

// Content exactly at the limit is accepted on both media.
func TestWriteAtContentLimit(t *testing.T) {
	for _, m := range []Media{MediaISO, MediaVFAT} {
		t.Run(string(m), func(t *testing.T) {
			es := cidataEntries()
			n := 0
			for _, e := range es {
				n += len(e.Data)
			}
			es = append(es, Entry{"fill", bigData(MaxContentBytes - n)})
			out := filepath.Join(t.TempDir(), "p.img")
			info, err := Write(context.Background(), Spec{m, "cidata", es}, out, Options{GID: -1})
			if err != nil {
				t.Fatalf("Write at limit: %v", err)
			}
			if b := blkid(t, out); b["LABEL"] != "cidata" {
				t.Errorf("blkid LABEL %q", b["LABEL"])
			}
			t.Logf("%s image of %d content bytes is %d bytes", m, MaxContentBytes, info.Size)
		})
	}
}
