package image

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFloppyGeometry builds a floppy image and compares it with what
// dosfstools' mkfs.fat makes of a 1.44 MB floppy (the BPB fields that give
// the geometry: sector size, cluster size, reserved sectors, FAT count,
// root entries, total sectors, media byte, FAT size, sectors per track,
// heads), then reads the file back with mtools, an independent FAT reader,
// and checks it with fsck.fat.
func TestFloppyGeometry(t *testing.T) {
	needTool(t, "mkfs.fat", "dosfstools")
	needTool(t, "mcopy", "mtools")
	dir := t.TempDir()
	data := []byte("<unattend xmlns=\"urn:schemas-microsoft-com:unattend\"/>\r\n")
	out := filepath.Join(dir, "f.img")
	info, err := Write(context.Background(), Spec{Media: MediaFloppy, Label: "SYSPREP", Entries: []Entry{{Path: "Autounattend.xml", Data: data}}}, out, Options{GID: -1})
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != FloppySize || info.FSType != FSTypeVFAT || info.Label != "SYSPREP" {
		t.Fatalf("info %+v", info)
	}
	ref := filepath.Join(dir, "ref.img")
	run(t, "mkfs.fat", "-C", ref, "1440")
	got, _ := os.ReadFile(out)
	want, _ := os.ReadFile(ref)
	if len(got) != len(want) {
		t.Fatalf("size %d, mkfs.fat's floppy %d", len(got), len(want))
	}
	// BPB bytes 11-27 (through the head count)
	if !bytes.Equal(got[11:28], want[11:28]) {
		t.Errorf("BPB geometry % x, mkfs.fat's % x", got[11:28], want[11:28])
	}
	listing := run(t, "mdir", "-i", out, "::/")
	if !strings.Contains(listing, "Autounattend.xml") {
		t.Errorf("mdir does not list the long name:\n%s", listing)
	}
	cp, err := exec.Command("mcopy", "-n", "-i", out, "::/Autounattend.xml", "-").Output()
	if err != nil || !bytes.Equal(cp, data) {
		t.Errorf("mcopy read %q (%v), want %q", cp, err, data)
	}
	if p, err := exec.LookPath("fsck.fat"); err == nil {
		if o, err := exec.Command(p, "-n", out).CombinedOutput(); err != nil {
			t.Errorf("fsck.fat -n: %v\n%s", err, o)
		}
	}
}

func TestFloppyTooLarge(t *testing.T) {
	out := filepath.Join(t.TempDir(), "f.img")
	_, err := Write(context.Background(), Spec{Media: MediaFloppy, Label: "SYSPREP", Entries: []Entry{{Path: "big", Data: make([]byte, FloppySize)}}}, out, Options{GID: -1})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1.44 MB floppy") {
		t.Fatalf("err %v, want ErrTooLarge naming the floppy", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused image left %s behind", out)
	}
}
