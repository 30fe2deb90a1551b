package engine

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/payload/job"
)

// domainMachine is what libvirt's domain capabilities are asked for: the
// domain's emulator, architecture, machine type and virtualisation type,
// read from its definition.
type domainMachine struct {
	Type string `xml:"type,attr"`
	OS   struct {
		Type struct {
			Arch    string `xml:"arch,attr"`
			Machine string `xml:"machine,attr"`
		} `xml:"type"`
	} `xml:"os"`
	Emulator string `xml:"devices>emulator"`
}

// domainCaps is the part of a <domainCapabilities> document that says
// whether the machine has a floppy drive: a disk device "floppy" and the
// bus "fdc" (libvirt lists it only when QEMU has a floppy controller for
// the machine: i440FX's built-in one, Q35's isa-fdc).
type domainCaps struct {
	Machine string `xml:"machine"`
	Disk    struct {
		Supported string `xml:"supported,attr"`
		Enums     []struct {
			Name   string   `xml:"name,attr"`
			Values []string `xml:"value"`
		} `xml:"enum"`
	} `xml:"devices>disk"`
}

// floppyCapable reports whether the domain capabilities document caps
// says the machine takes a floppy drive.
func floppyCapable(caps string) (bool, string, error) {
	var c domainCaps
	if err := xml.Unmarshal([]byte(caps), &c); err != nil {
		return false, "", fmt.Errorf("reading the domain capabilities: %w", err)
	}
	enum := func(name string) []string {
		for _, e := range c.Disk.Enums {
			if e.Name == name {
				return e.Values
			}
		}
		return nil
	}
	return c.Disk.Supported == "yes" && slices.Contains(enum("diskDevice"), "floppy") && slices.Contains(enum("bus"), "fdc"), c.Machine, nil
}

// sysprepMedium settles the medium of a sysprep job j (defaults applied)
// on the domain's machine, before anything is changed: auto (the job
// named neither sysprep_medium nor media) takes a floppy where the
// machine has a floppy controller and a CD-ROM where it has none; an
// explicit floppy on a machine without one is refused, naming
// sysprep_medium. The machine is the existing domain's, else that of the
// job's domain_xml. When libvirt cannot say (a host without the call, a
// definition whose emulator it cannot probe), the job's medium stands.
func (e *Engine) sysprepMedium(ctx context.Context, j *job.Job, auto bool) (job.SysprepMedium, error) {
	want := j.SysprepMedium
	if !auto && want != job.MediumFloppy {
		return want, nil // a CD-ROM fits every machine the agent attaches one to
	}
	cr, ok := e.Host.(libvirtx.DomainCapabilitiesReader)
	if !ok {
		return want, nil
	}
	def := j.DomainXML
	dom, err := e.Host.Domain(ctx, j.Domain)
	switch {
	case err == nil:
		def = dom.InactiveXML
	case libvirtx.IsDisconnected(err):
		return "", err
	case !libvirtx.IsNotFound(err):
		return "", fmt.Errorf("looking up domain %q: %w", j.Domain, err)
	}
	if def == "" {
		return want, nil // no such domain: run reports it
	}
	var m domainMachine
	if err := xml.Unmarshal([]byte(def), &m); err != nil {
		return want, nil // domain_xml libvirt will refuse: run reports it
	}
	caps, err := cr.DomainCapabilities(ctx, m.Emulator, m.OS.Type.Arch, m.OS.Type.Machine, m.Type)
	if err != nil {
		if libvirtx.IsDisconnected(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return "", err
		}
		e.log().Warn("cannot read the domain capabilities; the sysprep medium stays the job's", "domain", j.Domain, "machine", m.OS.Type.Machine, "medium", want, "err", err)
		return want, nil
	}
	fdc, machine, err := floppyCapable(caps)
	if err != nil {
		e.log().Warn("cannot read the domain capabilities; the sysprep medium stays the job's", "domain", j.Domain, "machine", m.OS.Type.Machine, "medium", want, "err", err)
		return want, nil
	}
	if machine == "" {
		machine = m.OS.Type.Machine
	}
	switch {
	case fdc && auto:
		return job.MediumFloppy, nil
	case auto:
		return job.MediumCDROM, nil
	case !fdc:
		return "", &failure{Code: result.CodeUnsupported, Field: "sysprep_medium",
			Err: fmt.Errorf("sysprep_medium \"floppy\": domain %s's machine %s (%s) has no floppy controller (libvirt's domain capabilities list no \"fdc\" disk bus for it); use sysprep_medium \"cdrom\" or leave sysprep_medium out to get a CD-ROM", j.Domain, machine, m.OS.Type.Arch)}
	}
	return want, nil
}
