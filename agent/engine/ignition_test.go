package engine

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/libvirtx/libvirtxtest"
	"github.com/vmpayload/vmpayload/payload/owner"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// archDomainXML is a domain of architecture arch and machine, with
// <features><acpi/></features> when acpi is set and a virtio-scsi
// controller when scsi is.
func archDomainXML(name, arch, machine string, acpi, scsi bool) string {
	f, ctl := "", ""
	if acpi {
		f = "<features><acpi/></features>"
	}
	if scsi {
		ctl = `<controller type='scsi' index='0' model='virtio-scsi'/>`
	}
	return fmt.Sprintf(`<domain type='kvm'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='%s' machine='%s'>hvm</type></os>%s<devices>%s</devices></domain>`, name, arch, machine, f, ctl)
}

// TestIgnitionDeliveryOnFakeHost (issue 41): the delivery an Ignition job
// gets for the domain's architecture, the blockdev drive, the refusals by
// name that change nothing, and the notice of a job for a domain that has
// run before.
func TestIgnitionDeliveryOnFakeHost(t *testing.T) {
	const (
		define = "DefineXML"
		start  = "Start"
		attach = "AttachDevice"
	)
	const ign = `"format":"ignition","hostname":"bd.example.com"`
	cases := []struct {
		name, arch, machine string
		noACPI, scsi        bool
		before              []string // jobs (members) run first on the stopped domain
		active, saved       bool
		job                 string
		// want
		code, field, msg string
		methods          []string
		blockdev         bool   // the definition has the blockdev drive, no fw_cfg entries
		fwcfg            bool   // the definition has the fw_cfg entries, no drive
		notice           string // in the notice ("" none, "-" must be empty)
	}{
		{name: "s390x: no delivery named gets blockdev", arch: "s390x", machine: "s390-ccw-virtio", job: ign + `,"action":"start"`, methods: []string{define, start}, blockdev: true, notice: "-"},
		{name: "ppc64le: no delivery named gets blockdev", arch: "ppc64le", machine: "pseries", job: ign, methods: []string{define}, blockdev: true, notice: "-"},
		{name: "ppc64: no delivery named gets blockdev", arch: "ppc64", machine: "pseries", job: ign, methods: []string{define}, blockdev: true, notice: "-"},
		{name: "s390x: fwcfg refused by name", arch: "s390x", machine: "s390-ccw-virtio", job: ign + `,"ignition_delivery":"fwcfg","action":"start"`,
			code: result.CodeInvalidJob, field: "ignition_delivery", msg: `its architecture is s390x, where QEMU has no fw_cfg device`},
		{name: "ppc64le: fwcfg refused by name", arch: "ppc64le", machine: "pseries", job: ign + `,"ignition_delivery":"fwcfg"`,
			code: result.CodeInvalidJob, field: "ignition_delivery", msg: `use "blockdev" (the default there)`},
		{name: "s390x: configdrive kept", arch: "s390x", machine: "s390-ccw-virtio", job: ign + `,"ignition_delivery":"configdrive"`, methods: []string{define}},
		{name: "x86 without ACPI: fwcfg refused by name", arch: "x86_64", machine: "pc", noACPI: true, job: ign,
			code: result.CodeInvalidJob, field: "ignition_delivery", msg: "the guest kernel's qemu_fw_cfg driver binds through ACPI (device QEMU0002) and the domain has no <features><acpi/>"},
		{name: "x86 without ACPI: nocloud image kept", arch: "x86_64", machine: "pc", noACPI: true, job: ign + `,"ignition_delivery":"nocloud"`, methods: []string{define}},
		{name: "aarch64 without ACPI: fwcfg (device tree)", arch: "aarch64", machine: "virt", noACPI: true, job: ign, methods: []string{define}, fwcfg: true},
		{name: "x86: blockdev asked for", arch: "x86_64", machine: "pc", job: ign + `,"ignition_delivery":"blockdev"`, methods: []string{define}, blockdev: true},
		{name: "x86: blockdev replaces fw_cfg", arch: "x86_64", machine: "pc", before: []string{ign}, job: ign + `,"ignition_delivery":"blockdev"`, methods: []string{define}, blockdev: true},
		{name: "x86: fw_cfg replaces blockdev", arch: "x86_64", machine: "pc", before: []string{ign + `,"ignition_delivery":"blockdev"`}, job: ign, methods: []string{define}, fwcfg: true},
		{name: "blockdev moves a vfat payload disk from SCSI to virtio", arch: "x86_64", machine: "pc", scsi: true, before: []string{`"hostname":"ci","media":"vfat"`},
			job: ign + `,"ignition_delivery":"blockdev"`, methods: []string{define}, blockdev: true},
		{name: "s390x running: virtio disk hot-plugged, first boot notice", arch: "s390x", machine: "s390-ccw-virtio", active: true, job: ign,
			methods: []string{attach, define}, blockdev: true, notice: NoticeIgnitionFirstBoot},
		{name: "running fw_cfg: next cold start and first boot", arch: "x86_64", machine: "pc", active: true, job: ign, methods: []string{define}, fwcfg: true,
			notice: NoticeFwCfgNextColdStart + "; but " + NoticeIgnitionFirstBoot},
		{name: "running fw_cfg re-submitted: no notice", arch: "x86_64", machine: "pc", before: []string{ign}, active: true, job: ign, fwcfg: true, notice: "-"},
		{name: "running configdrive: first boot notice", arch: "x86_64", machine: "pc", before: []string{ign + `,"ignition_delivery":"configdrive"`}, active: true,
			job: `"format":"ignition","hostname":"other","ignition_delivery":"configdrive"`, methods: []string{"UpdateDevice", define}, notice: NoticeIgnitionFirstBoot},
		{name: "stopped with a managed save: first boot notice", arch: "x86_64", machine: "pc", saved: true, job: ign, methods: []string{define}, fwcfg: true, notice: NoticeIgnitionFirstBoot},
		{name: "stopped, never seen running: no notice", arch: "x86_64", machine: "pc", job: ign, methods: []string{define}, fwcfg: true, notice: "-"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("hign-%d", i)
			f, d, e := fakeJobEngine(t, archDomainXML(name, c.arch, c.machine, !c.noACPI, c.scsi))
			run := func(members, id string) result.Result {
				if !strings.Contains(members, `"action"`) {
					members += `,"action":"attach"`
				}
				return runDoc(t, e, fmt.Sprintf(`{"version":1,"domain":%q,%s}`, name, members), id)
			}
			for k, b := range c.before {
				if r := run(b, fmt.Sprintf("before-%d", k)); r.State != result.StateDone {
					t.Fatalf("earlier job %s: %+v", b, r.Error)
				}
			}
			if c.active {
				f.SetActive(d.UUID, true)
			}
			if c.saved {
				f.SetSavedXML(d.UUID, f.XML(d.UUID))
			}
			beforeXML := f.XML(d.UUID)
			beforeFiles := testenv.DirNames(t, e.PayloadDir)
			f.ResetCalls()
			r := run(c.job, "job")
			if c.code != "" {
				if r.Error == nil || r.Error.Code != c.code || r.Error.Field != c.field || !strings.Contains(r.Error.Message, c.msg) {
					t.Fatalf("result %s %+v, want %s %s %q", r.State, r.Error, c.code, c.field, c.msg)
				}
				if x := f.XML(d.UUID); x != beforeXML {
					t.Errorf("the refused job changed the definition:\n%s\n---\n%s", beforeXML, x)
				}
				if got := testenv.DirNames(t, e.PayloadDir); !reflect.DeepEqual(got, beforeFiles) {
					t.Errorf("payload directory %v, before %v", got, beforeFiles)
				}
				if m := f.Methods(); len(m) != 0 {
					t.Errorf("libvirt changes %q", m)
				}
				return
			}
			if r.State != result.StateDone {
				t.Fatalf("result %s %+v", r.State, r.Error)
			}
			if got := f.Methods(); !reflect.DeepEqual(got, c.methods) && !(len(got) == 0 && len(c.methods) == 0) {
				t.Errorf("libvirt changes %q, want %q", got, c.methods)
			}
			x := f.XML(d.UUID)
			if c.active && c.blockdev {
				// the fake's AttachDevice records the device and changes
				// nothing: judge the device XML it was given
				for _, call := range f.Calls() {
					if call.Method == attach {
						if !strings.Contains(call.XML, "<serial>ignition</serial>") || !strings.Contains(call.XML, "bus='virtio'") || !strings.Contains(call.XML, "file='"+r.Payload.Path+"'") {
							t.Errorf("hot-plugged device:\n%s", call.XML)
						}
					}
				}
				c.blockdev = false
			}
			ents, _ := domxml.FwCfgEntries(x)
			p, found, _ := domxml.FindPayload(x)
			rc, _ := openedRecipe(t, x)
			switch {
			case c.blockdev:
				if !found || p.Bus != domxml.BusVirtio || p.Kind != domxml.KindDisk || p.Path != r.Payload.Path || len(ents) != 0 ||
					!strings.Contains(x, "<serial>ignition</serial>") || !strings.Contains(x, "<readonly/>") || !strings.HasSuffix(p.Path, ".ign") {
					t.Errorf("definition has drive %+v (found %v), fw_cfg %v, want the blockdev drive of %s:\n%s", p, found, ents, r.Payload.Path, x)
				}
				if rc == nil || rc.Job.IgnitionDelivery != "blockdev" || rc.Path != p.Path || rc.Label != "" {
					t.Errorf("recipe %+v", rc)
				}
				if r.Device == nil || r.Device.Bus != "virtio" || r.Device.Kind != "disk" || len(r.FwCfg) != 0 {
					t.Errorf("result device %+v fw_cfg %v", r.Device, r.FwCfg)
				}
			case c.fwcfg:
				if found || len(ents) != 2 || strings.Contains(x, "<serial>") {
					t.Errorf("definition has drive %+v (found %v), fw_cfg %v, want the fw_cfg entries:\n%s", p, found, ents, x)
				}
			}
			// files of earlier payloads the definition no longer names are
			// gone (a running domain keeps its until it stops)
			if !c.active {
				doc, err := domxml.Read(x)
				if err != nil {
					t.Fatal(err)
				}
				files := doc.ReferencedFiles()
				for _, n := range testenv.DirNames(t, e.PayloadDir) {
					if strings.HasSuffix(n, ".owner") {
						continue
					}
					if !strings.Contains(strings.Join(files, "\n"), n) {
						t.Errorf("payload directory keeps %s, which the definition does not name", n)
					}
				}
			}
			switch c.notice {
			case "":
			case "-":
				if r.Notice != "" {
					t.Errorf("notice %q, want none", r.Notice)
				}
			default:
				if r.Notice != c.notice {
					t.Errorf("notice %q,\nwant %q", r.Notice, c.notice)
				}
			}
		})
	}
}

// TestStartFailureOnFakeHost: a start the host refuses puts the
// definition back as it was before the job, for every kind and delivery,
// and removes the payload file it wrote (issue 41; the real libvirtd:
// TestLibvirtdStartFailureKeepsDefinition).
func TestStartFailureOnFakeHost(t *testing.T) {
	for i, c := range []struct{ name, before, job string }{
		{name: "nocloud iso", job: `"hostname":"sf"`},
		{name: "nocloud vfat", job: `"hostname":"sf","media":"vfat"`},
		{name: "configdrive over an earlier drive", before: `"hostname":"earlier"`, job: `"hostname":"sf","format":"configdrive"`},
		{name: "ignition fwcfg", job: `"hostname":"sf","format":"ignition"`},
		{name: "ignition fwcfg over an earlier drive", before: `"hostname":"earlier"`, job: `"hostname":"sf","format":"ignition"`},
		{name: "ignition blockdev over earlier fw_cfg", before: `"hostname":"earlier","format":"ignition"`, job: `"hostname":"sf","format":"ignition","ignition_delivery":"blockdev"`},
		{name: "ignition nocloud", job: `"hostname":"sf","format":"ignition","ignition_delivery":"nocloud"`},
		{name: "sysprep floppy", job: "sysprep-floppy"},
		{name: "sysprep cdrom", job: "sysprep-cdrom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("hsf-%d", i)
			f, d, e := fakeJobEngine(t, fakeDomainXML(name, false))
			e.SecretsDir = exampleSecrets
			if c.before != "" {
				if r := runDoc(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach",%s}`, name, c.before), "before"); r.State != result.StateDone {
					t.Fatalf("earlier job: %+v", r.Error)
				}
			}
			beforeXML, beforeFiles := f.XML(d.UUID), testenv.DirNames(t, e.PayloadDir)
			doc := fmt.Sprintf(`{"version":1,"domain":%q,"action":"start",%s}`, name, c.job)
			if strings.HasPrefix(c.job, "sysprep") {
				doc = sysprepDoc(t, c.job, name, "start", "")
			}
			f.FailNext("Start", libvirtxtest.Failed("no memory"))
			r := runDoc(t, e, doc, "job")
			if r.Error == nil || r.Error.Code != result.CodeLibvirt || !strings.Contains(r.Error.Message, "the definition is back as it was before the job") {
				t.Fatalf("result %s %+v", r.State, r.Error)
			}
			if x := f.XML(d.UUID); x != beforeXML {
				t.Errorf("definition after the failed start:\n%s\nbefore:\n%s", x, beforeXML)
			}
			if got := testenv.DirNames(t, e.PayloadDir); !reflect.DeepEqual(got, beforeFiles) {
				t.Errorf("payload directory %v, before the job %v", got, beforeFiles)
			}
		})
	}
}

// TestBlockdevRebuildAndOrphans: the blockdev delivery is durable like
// every payload, on libvirt's test driver (libvirt's own parser reads the
// drive with its serial and writes it back): the recipe records the
// delivery, the start-up rebuild makes a missing config file again
// byte-identical, orphan collection keeps it (the drive and the recipe
// name it) while a stray file goes, the owner marker names this host, and
// undefining the domain removes it.
func TestBlockdevRebuildAndOrphans(t *testing.T) {
	h := emptyNodeHost(t)
	ctx := context.Background()
	e := newEngine(t, h)
	e.HostID = "host-ign"
	defineTestDomain(t, h, "vmpx-blockdev")
	r := runDone(t, e, `{"version":1,"domain":"vmpx-blockdev","action":"attach","format":"ignition","ignition_delivery":"blockdev","hostname":"bd","users":[{"name":"core","password":"plain-core"}]}`)
	d, err := h.Domain(ctx, "vmpx-blockdev")
	if err != nil {
		t.Fatal(err)
	}
	p, found, err := domxml.FindPayload(d.InactiveXML)
	if err != nil || !found || p.Path != r.Payload.Path || p.Bus != domxml.BusVirtio || !strings.Contains(d.InactiveXML, "<serial>ignition</serial>") || strings.Contains(d.InactiveXML, "plain-core") {
		t.Fatalf("libvirt's definition (drive %+v):\n%s", p, d.InactiveXML)
	}
	if o, err := owner.Of(r.Payload.Path); err != nil || o != "host-ign" {
		t.Errorf("owner marker %q %v", o, err)
	}
	rebuildAndCollect(t, e, r)
	if _, err := os.Stat(r.Payload.Path); err != nil {
		t.Errorf("orphan collection removed the blockdev config: %v", err)
	}
	e.RemoveDomainImages(d.UUID)
	if _, err := os.Stat(r.Payload.Path); !os.IsNotExist(err) {
		t.Errorf("undefined domain's config kept: %v", err)
	}
}
