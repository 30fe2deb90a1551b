package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStamp(t *testing.T) {
	spec := Spec{Media: MediaISO, Label: "cidata", Entries: cidataEntries()}
	t1, s1 := Stamp(spec)
	rev := spec
	rev.Entries = nil
	for i := len(spec.Entries) - 1; i >= 0; i-- {
		rev.Entries = append(rev.Entries, spec.Entries[i])
	}
	if t2, s2 := Stamp(rev); !t2.Equal(t1) || s2 != s1 {
		t.Errorf("entry order changed the stamp")
	}
	if t1.Before(stampBase) || t1.After(time.Date(2018, 1, 1, 0, 0, 0, 0, time.UTC)) || t1.Second()%2 != 0 || s1 == 0 {
		t.Errorf("stamp %v serial %08x out of range", t1, s1)
	}
	for name, other := range map[string]Spec{
		"media": {Media: MediaVFAT, Label: "cidata", Entries: spec.Entries},
		"label": {Media: MediaISO, Label: "CIDATA", Entries: spec.Entries},
		"data":  {Media: MediaISO, Label: "cidata", Entries: append([]Entry{{Path: "meta-data", Data: []byte("x")}}, spec.Entries[1:]...)},
		"split": {Media: MediaISO, Label: "cidata", Entries: []Entry{{Path: "a", Data: []byte("bc")}}},
	} {
		if name == "split" {
			a, _ := Stamp(other)
			b, _ := Stamp(Spec{Media: MediaISO, Label: "cidata", Entries: []Entry{{Path: "ab", Data: []byte("c")}}})
			if a.Equal(b) {
				t.Errorf("path/data boundary does not enter the stamp")
			}
			continue
		}
		if t2, s2 := Stamp(other); t2.Equal(t1) && s2 == s1 {
			t.Errorf("%s change kept the stamp", name)
		}
	}
}

// TestNormalizedFieldsSeenByRealTools checks with isoinfo and mdir that
// every date, owner, mode and link count reads as Stamp and the fixed
// values, whatever the local time zone.
func TestNormalizedFieldsSeenByRealTools(t *testing.T) {
	needTool(t, "isoinfo", "genisoimage")
	needTool(t, "mdir", "mtools")
	saved := time.Local
	time.Local = time.FixedZone("odd", 5*3600+1800)
	defer func() { time.Local = saved }()

	dir := t.TempDir()
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"cidata.iso", Spec{Media: MediaISO, Label: "cidata", Entries: cidataEntries()}},
		{"config2.iso", Spec{Media: MediaISO, Label: "config-2", Entries: config2Entries()}},
		{"config2.img", Spec{Media: MediaVFAT, Label: "config-2", Entries: config2Entries()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, c.name)
			if _, err := Write(context.Background(), c.spec, out, Options{GID: -1, NoSync: true}); err != nil {
				t.Fatal(err)
			}
			stamp, serial := Stamp(c.spec)
			if c.spec.Media == MediaISO {
				pvd := run(t, "isoinfo", "-d", "-i", out)
				if !strings.Contains(pvd, "Volume id: "+c.spec.Label) {
					t.Errorf("isoinfo -d: %s", pvd)
				}
				list := run(t, "isoinfo", "-R", "-l", "-i", out)
				day := stamp.Format("Jan 2 2006")
				day2 := stamp.Format("Jan _2 2006")
				for _, line := range strings.Split(list, "\n") {
					if !strings.HasPrefix(line, "d") && !strings.HasPrefix(line, "-") {
						continue
					}
					f := strings.Fields(line)
					if len(f) < 9 {
						t.Errorf("unexpected line %q", line)
						continue
					}
					wantMode := "-r--r--r--"
					if line[0] == 'd' {
						wantMode = "dr-xr-xr-x"
					}
					if f[0] != wantMode || f[2] != "0" || f[3] != "0" || !(strings.Contains(line, day) || strings.Contains(line, day2)) {
						t.Errorf("entry %q: want mode %s, owner 0 0, date %s", line, wantMode, day)
					}
				}
				uuid := blkid(t, out)["UUID"]
				if want := stamp.Format("2006-01-02-15-04-05-00"); uuid != want {
					t.Errorf("blkid UUID %q, want %q (the stamp)", uuid, want)
				}
				return
			}
			mdir := run(t, "mdir", "-a", "-i", out, "::/openstack/latest")
			want := stamp.Format("2006-01-02")
			n := 0
			for _, line := range strings.Split(mdir, "\n") {
				if strings.Contains(line, "<DIR>") || strings.Contains(line, "json") || strings.Contains(line, "user_data") {
					n++
					if !strings.Contains(line, want) {
						t.Errorf("mdir line %q lacks date %s", line, want)
					}
				}
			}
			if n < 4 {
				t.Errorf("mdir listed %d entries:\n%s", n, mdir)
			}
			if got := blkid(t, out)["UUID"]; !strings.EqualFold(got, fmt.Sprintf("%04X-%04X", serial>>16, serial&0xffff)) {
				t.Errorf("blkid UUID %q, want the serial %08X", got, serial)
			}
			run(t, "fsck.vfat", "-n", out)
		})
	}
}

// TestWriteIsDeterministicInProcess builds each spec twice with a different
// local time zone and compares the bytes (the cross-process proof is
// payload.TestReproducibleAcrossProcesses).
func TestWriteIsDeterministicInProcess(t *testing.T) {
	saved := time.Local
	defer func() { time.Local = saved }()
	dir := t.TempDir()
	for _, spec := range []Spec{
		{Media: MediaISO, Label: "cidata", Entries: cidataEntries()},
		{Media: MediaISO, Label: "config-2", Entries: config2Entries()},
		{Media: MediaVFAT, Label: "cidata", Entries: cidataEntries()},
		{Media: MediaVFAT, Label: "config-2", Entries: config2Entries()},
	} {
		var imgs [][]byte
		for i, zone := range []*time.Location{time.UTC, time.FixedZone("x", -7*3600)} {
			time.Local = zone
			out := filepath.Join(dir, fmt.Sprintf("%s-%s-%d", spec.Label, spec.Media, i))
			if _, err := Write(context.Background(), spec, out, Options{GID: -1, NoSync: true}); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			imgs = append(imgs, b)
		}
		if !bytes.Equal(imgs[0], imgs[1]) {
			t.Errorf("%s %s: two builds differ", spec.Label, spec.Media)
		}
	}
}
