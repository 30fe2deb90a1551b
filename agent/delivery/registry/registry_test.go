package registry_test

import (
	"context"
	"slices"
	"testing"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/delivery/registry"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// TestRegistry: every delivery is found by its name, Others leaves it out,
// and an unknown name is an error naming it.
func TestRegistry(t *testing.T) {
	s := registry.New(&delivery.Env{PayloadDir: "/p"})
	names := registry.Names()
	if !slices.Equal(names, []string{"fwcfg", "smbios", "drive"}) {
		t.Fatalf("Names %v", names)
	}
	for _, n := range names {
		d, err := s.Get(n)
		if err != nil || d.Name() != n {
			t.Fatalf("Get(%q): %v, %v", n, d, err)
		}
		for _, o := range s.Others(n) {
			if o.Name() == n {
				t.Errorf("Others(%q) holds it", n)
			}
		}
		if len(s.Others(n)) != len(names)-1 {
			t.Errorf("Others(%q): %d deliveries", n, len(s.Others(n)))
		}
	}
	if _, err := s.Get("floppy"); err == nil {
		t.Error("Get(\"floppy\") found a delivery")
	}
}

// fileless is a delivery without files (as SMBIOS strings will be): the
// interface asks no file of it.
type fileless struct{}

func (fileless) Name() string { return "fileless" }
func (fileless) Attach(context.Context, libvirtx.DomainInfo, *delivery.Payload, *result.Result) (delivery.Attached, error) {
	return delivery.Attached{}, nil
}
func (fileless) Files(string) []string                        { return nil }
func (fileless) Drop(*domxml.Edit, libvirtx.DomainInfo) error { return nil }
func (fileless) Detach(context.Context, libvirtx.DomainInfo, *domxml.Edit, *result.Result) (delivery.Detached, error) {
	return delivery.Detached{}, nil
}

var _ delivery.Delivery = fileless{}
