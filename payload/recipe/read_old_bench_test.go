package recipe

import (
	"testing"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// BenchmarkReadDomain reads from a typical definition what vmpayload
// reads of one: its UUID, recipe, payload drive and fw_cfg entries.
func BenchmarkReadDomain(b *testing.B) {
	x := typicalDomain(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := domxml.DomainUUID(x); err != nil {
			b.Fatal(err)
		}
		if _, ok, err := FromDomainXML(x); err != nil || !ok {
			b.Fatal(ok, err)
		}
		if _, ok, err := domxml.FindPayload(x); err != nil || !ok {
			b.Fatal(ok, err)
		}
		if _, err := domxml.FwCfgEntries(x); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadDomainHook reads what the hook reads: recipe and UUID.
func BenchmarkReadDomainHook(b *testing.B) {
	x := typicalDomain(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := FromDomainXML(x); err != nil || !ok {
			b.Fatal(ok, err)
		}
		if _, err := domxml.DomainUUID(x); err != nil {
			b.Fatal(err)
		}
	}
}
