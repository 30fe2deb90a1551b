package recipe

import (
	"testing"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// BenchmarkReadDomain reads from a typical definition what vmpayload
// reads of one: its UUID, recipe, payload drive and fw_cfg entries, from
// one Document. (Before the Document it called domxml.DomainUUID,
// FromDomainXML, domxml.FindPayload and domxml.FwCfgEntries on the text:
// compare the two under the same name.)
func BenchmarkReadDomain(b *testing.B) {
	x := typicalDomain(b)
	b.ReportAllocs()
	for b.Loop() {
		d, err := domxml.Read(x)
		if err != nil {
			b.Fatal(err)
		}
		_ = d.UUID()
		if _, ok, err := FromDocument(d); err != nil || !ok {
			b.Fatal(ok, err)
		}
		if _, ok, err := d.FindPayload(); err != nil || !ok {
			b.Fatal(ok, err)
		}
		_ = d.FwCfgEntries()
	}
}

// BenchmarkReadDomainHook reads what the hook reads: recipe and UUID
// (before: FromDomainXML and domxml.DomainUUID).
func BenchmarkReadDomainHook(b *testing.B) {
	x := typicalDomain(b)
	b.ReportAllocs()
	for b.Loop() {
		d, _, ok, err := ReadDomainXML(x)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		_ = d.UUID()
	}
}
