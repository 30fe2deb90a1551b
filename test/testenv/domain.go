package testenv

import (
	"fmt"
	"strings"
)

// Domain is the small domain definition tests define in libvirt or hand to
// the agent: by default a TCG guest (type 'qemu') with no disk and no NIC
// that sits in the firmware with nothing to boot, which is enough to be
// "running". XML renders it; zero fields take the defaults below.
type Domain struct {
	Type      string // 'qemu' (default), 'kvm' or 'test'
	Name      string
	UUID      string // none when empty
	MemoryMiB int    // 48 when zero
	Arch      string // x86_64 when empty
	Machine   string // pc when empty
	Boot      string // <boot dev=…/>, none when empty
	ACPI      bool   // <features><acpi/></features>
	Metadata  string // inner XML of <metadata>, none when empty
	Devices   string // device XML, before the memballoon
	Tail      string // top-level elements after <devices> (a <seclabel>)
}

// XML renders d on one line. QEMU domains (qemu, kvm) get
// on_poweroff destroy, the emulator /usr/bin/qemu-system-<arch> and no
// memballoon; the test driver's get only the devices asked for.
func (d Domain) XML() string {
	typ, mem, arch, machine := d.Type, d.MemoryMiB, d.Arch, d.Machine
	if typ == "" {
		typ = "qemu"
	}
	if mem == 0 {
		mem = 48
	}
	if arch == "" {
		arch = "x86_64"
	}
	if machine == "" {
		machine = "pc"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<domain type='%s'><name>%s</name>", typ, d.Name)
	if d.UUID != "" {
		fmt.Fprintf(&b, "<uuid>%s</uuid>", d.UUID)
	}
	fmt.Fprintf(&b, "<memory unit='MiB'>%d</memory><vcpu>1</vcpu><os><type arch='%s' machine='%s'>hvm</type>", mem, arch, machine)
	if d.Boot != "" {
		fmt.Fprintf(&b, "<boot dev='%s'/>", d.Boot)
	}
	b.WriteString("</os>")
	if d.ACPI {
		b.WriteString("<features><acpi/></features>")
	}
	if d.Metadata != "" {
		fmt.Fprintf(&b, "<metadata>%s</metadata>", d.Metadata)
	}
	if typ == "test" {
		fmt.Fprintf(&b, "<devices>%s</devices>%s</domain>", d.Devices, d.Tail)
		return b.String()
	}
	fmt.Fprintf(&b, "<on_poweroff>destroy</on_poweroff><devices><emulator>/usr/bin/qemu-system-%s</emulator>%s<memballoon model='none'/></devices>%s</domain>", arch, d.Devices, d.Tail)
	return b.String()
}
