// Package registry names every delivery: adding one is a package under
// agent/delivery and one line here.
package registry

import (
	"fmt"
	"slices"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/delivery/drive"
	"github.com/vmpayload/vmpayload/agent/delivery/fwcfg"
	"github.com/vmpayload/vmpayload/agent/delivery/smbios"
)

// all are the deliveries, in the order a detach takes them out of a
// definition: the fw_cfg entries first, the SMBIOS strings, then the drive (whose live
// changes come last).
var all = []struct {
	name string
	make func(*delivery.Env) delivery.Delivery
}{
	{fwcfg.Name, fwcfg.New},
	{smbios.Name, smbios.New},
	{drive.Name, drive.New},
}

// Set is one engine's deliveries, by name.
type Set struct {
	list []delivery.Delivery
}

// New makes every delivery for env.
func New(env *delivery.Env) *Set {
	s := &Set{}
	for _, d := range all {
		s.list = append(s.list, d.make(env))
	}
	return s
}

// Names returns the names of the registered deliveries.
func Names() []string {
	out := make([]string, len(all))
	for i, d := range all {
		out[i] = d.name
	}
	return out
}

// Get returns the delivery named name.
func (s *Set) Get(name string) (delivery.Delivery, error) {
	for _, d := range s.list {
		if d.Name() == name {
			return d, nil
		}
	}
	return nil, fmt.Errorf("no delivery %q (known: %v)", name, Names())
}

// All returns every delivery, in registry order.
func (s *Set) All() []delivery.Delivery { return s.list }

// Others returns every delivery but the one named name.
func (s *Set) Others(name string) []delivery.Delivery {
	return slices.DeleteFunc(slices.Clone(s.list), func(d delivery.Delivery) bool { return d.Name() == name })
}
