package image

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vmpayload/vmpayload/test/testenv"
)

func TestWriteJudgedByRealTools(t *testing.T) {
	const gid = 4242
	cases := []struct {
		name    string
		spec    Spec
		fstype  string
		joliet  bool
		nameArg string // a long name isoinfo -R -l must show
	}{
		{"iso cidata", Spec{MediaISO, "cidata", cidataEntries()}, "iso9660", true, "network-config"},
		{"iso config-2", Spec{MediaISO, "config-2", config2Entries()}, "iso9660", true, "meta_data.json"},
		{"vfat cidata lower", Spec{MediaVFAT, "cidata", cidataEntries()}, "vfat", false, ""},
		{"vfat CIDATA", Spec{MediaVFAT, "CIDATA", cidataEntries()}, "vfat", false, ""},
		{"vfat config-2", Spec{MediaVFAT, "config-2", config2Entries()}, "vfat", false, ""},
		{"vfat large file", Spec{MediaVFAT, "cidata", append(cidataEntries(), Entry{"big.bin", bigData(3 << 20)})}, "vfat", false, ""},
		{"iso large file", Spec{MediaISO, "cidata", append(cidataEntries(), Entry{"big.bin", bigData(3 << 20)})}, "iso9660", true, "big.bin"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpdir := t.TempDir()
			t.Setenv("TMPDIR", tmpdir)
			dir := t.TempDir()
			out := filepath.Join(dir, "payload.img")
			info, err := Write(context.Background(), tc.spec, out, Options{GID: gid})
			if err != nil {
				t.Fatalf("Write: %v", err)
			}

			st, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != DefaultMode {
				t.Errorf("mode %o, want %o", st.Mode().Perm(), DefaultMode)
			}
			if g := st.Sys().(*syscall.Stat_t).Gid; g != gid {
				t.Errorf("gid %d, want %d", g, gid)
			}
			if got := testenv.DirNames(t, dir); !slices.Equal(got, []string{"payload.img"}) {
				t.Errorf("output dir holds %v, want only payload.img", got)
			}
			if got := testenv.DirNames(t, tmpdir); len(got) != 0 {
				t.Errorf("TMPDIR holds leftovers %v", got)
			}
			if info.Path != out || info.FSType != tc.fstype || info.Label != tc.spec.Label || info.Size != st.Size() {
				t.Errorf("info = %+v", info)
			}
			if sha := fileSHA(t, out); info.SHA256 != sha {
				t.Errorf("info.SHA256 %s, file %s", info.SHA256, sha)
			}
			if len(info.Files) != len(tc.spec.Entries) {
				t.Errorf("info lists %d files, want %d", len(info.Files), len(tc.spec.Entries))
			}

			b := blkid(t, out)
			if b["TYPE"] != tc.fstype || b["LABEL"] != tc.spec.Label {
				t.Errorf("blkid TYPE=%q LABEL=%q, want %q %q", b["TYPE"], b["LABEL"], tc.fstype, tc.spec.Label)
			}

			ext := t.TempDir()
			switch tc.spec.Media {
			case MediaISO:
				judgeISO(t, out, ext, tc.spec, tc.joliet, tc.nameArg)
			case MediaVFAT:
				judgeVFAT(t, out, ext, tc.spec)
			}
			for _, e := range tc.spec.Entries {
				got, err := ReadFile(out, e.Path)
				if err != nil || string(got) != string(e.Data) {
					t.Errorf("ReadFile(%q) = %d bytes, %v", e.Path, len(got), err)
				}
			}
		})
	}
}

func bigData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>11)
	}
	return b
}

func judgeISO(t *testing.T, img, ext string, spec Spec, joliet bool, longName string) {
	t.Helper()
	needTool(t, "xorriso", "xorriso")
	needTool(t, "isoinfo", "genisoimage")
	run(t, "xorriso", "-osirrox", "on", "-indev", img, "-extract", "/", ext)
	compareTree(t, treeFiles(t, ext), spec.Entries)

	d := run(t, "isoinfo", "-d", "-i", img)
	if !strings.Contains(d, "Rock Ridge signatures version") {
		t.Errorf("isoinfo -d reports no Rock Ridge:\n%s", d)
	}
	if !strings.Contains(d, "Volume id: "+spec.Label+"\n") {
		t.Errorf("isoinfo -d volume id is not %q:\n%s", spec.Label, d)
	}
	if got := strings.Contains(d, "Joliet with UCS level"); got != joliet {
		t.Errorf("Joliet present = %v, want %v", got, joliet)
	}
	l := run(t, "isoinfo", "-R", "-l", "-i", img)
	if !strings.Contains(l, " "+longName+"\n") && !strings.Contains(l, " "+longName+" ") {
		t.Errorf("isoinfo -R -l does not show Rock Ridge name %q:\n%s", longName, l)
	}
	// Every file must be 0444 and every directory 0555 so any guest user can read.
	for _, line := range strings.Split(l, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || len(f[0]) != 10 {
			continue
		}
		name := f[len(f)-1]
		switch f[0][0] {
		case '-':
			if f[0] != "-r--r--r--" {
				t.Errorf("file %s has mode %s, want -r--r--r--", name, f[0])
			}
		case 'd':
			if f[0] != "dr-xr-xr-x" {
				t.Errorf("dir %s has mode %s, want dr-xr-xr-x", name, f[0])
			}
		}
	}
	if joliet {
		jl := run(t, "isoinfo", "-J", "-f", "-i", img)
		for _, e := range spec.Entries {
			if !strings.Contains(jl, "/"+e.Path+"\n") {
				t.Errorf("Joliet tree lacks %q:\n%s", e.Path, jl)
			}
		}
	}
}

func judgeVFAT(t *testing.T, img, ext string, spec Spec) {
	t.Helper()
	needTool(t, "mcopy", "mtools")
	needTool(t, "fsck.vfat", "dosfstools")
	t.Setenv("MTOOLS_SKIP_CHECK", "1")
	run(t, "fsck.vfat", "-n", img)
	run(t, "mcopy", "-s", "-n", "-i", img, "::/", ext)
	// mcopy -s of ::/ copies the root's contents into ext.
	compareTree(t, treeFiles(t, ext), spec.Entries)
	listing := run(t, "mdir", "-/", "-i", img, "::/")
	for _, e := range spec.Entries {
		base := filepath.Base(e.Path)
		if !strings.Contains(listing, base) {
			t.Errorf("mdir does not list long name %q:\n%s", base, listing)
		}
	}
}
