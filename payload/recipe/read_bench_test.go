package recipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/job"
)

// typicalDomain is a libvirt definition (libvirtx/domxml's live sample,
// 2.9 KB) holding a payload drive and the sealed recipe of example
// 02-full-nocloud: what the hook and a job read.
func typicalDomain(b *testing.B) string {
	data, err := os.ReadFile(filepath.Join(examplesDir, "02-full-nocloud.json"))
	if err != nil {
		b.Fatal(err)
	}
	j, rep := job.Parse(data)
	if err := rep.Err(); err != nil {
		b.Fatal(err)
	}
	r, res := build(b, j, b.TempDir(), secretsDir)
	_, el := newElement(b, r, res)
	x, err := os.ReadFile("../../libvirtx/domxml/testdata/live-qemu.xml")
	if err != nil {
		b.Fatal(err)
	}
	s := strings.Replace(string(x), "</description>", "</description>\n  <metadata>\n    "+el+"\n  </metadata>", 1)
	ed, err := domxml.NewEdit(s)
	if err == nil {
		_, _, err = ed.SetPayloadDrive(res.Path, domxml.BusAuto)
	}
	if err == nil {
		s, err = ed.XML()
	}
	if err != nil {
		b.Fatal(err)
	}
	return s
}
