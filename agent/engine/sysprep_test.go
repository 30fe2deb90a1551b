package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/testenv"
)

const exampleSecrets = "../../configs/examples/secrets"

// sysprepDoc is the job configs/examples/windows/<example>.json for
// domain name, with action and the members of extra (JSON object text)
// replacing or adding to its own.
func sysprepDoc(t *testing.T, example, name, action, extra string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../configs/examples/windows", example+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["domain"], m["action"] = name, action
	if extra != "" {
		if err := json.Unmarshal([]byte(extra), &m); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// TestSysprepOnFakeHost: a sysprep job on the fake host attaches its floppy
// (fdc) or CD-ROM to a stopped domain with the recipe, from which the hook's
// rebuild gives the same bytes; a running domain cannot take a floppy and
// an answer file the check refuses changes nothing.
func TestSysprepOnFakeHost(t *testing.T) {
	const (
		define = "DefineXML"
		start  = "Start"
		update = "UpdateDevice"
	)
	cases := []struct {
		name, example, action, extra string
		cdrom                        bool // an earlier CD-ROM payload job ran
		brokenSecret                 bool // sysprep-unattend holds no answer file
		floppy                       bool // an earlier sysprep floppy job ran
		detached                     bool // the job removes the payload
		active                       bool
		code                         string
		methods                      []string
		kind                         domxml.Kind
		bus                          domxml.Bus
		msg                          string
	}{
		{name: "stopped: floppy attached and started", example: "sysprep-floppy", action: "start", methods: []string{define, start}, kind: domxml.KindFloppy, bus: domxml.BusFDC},
		{name: "stopped: floppy by secret", example: "sysprep-secret", action: "attach", methods: []string{define}, kind: domxml.KindFloppy, bus: domxml.BusFDC},
		{name: "stopped: cdrom attached", example: "sysprep-cdrom", action: "attach", methods: []string{define}, kind: domxml.KindCDROM, bus: domxml.BusIDE},
		{name: "stopped: floppy replaces a CD-ROM payload", example: "sysprep-floppy", action: "attach", cdrom: true, methods: []string{define}, kind: domxml.KindFloppy, bus: domxml.BusFDC},
		{name: "running: floppy refused, nothing changed", example: "sysprep-floppy", action: "attach", cdrom: true, active: true, code: result.CodeDomainRunning, msg: "a sysprep floppy is only attached to a stopped domain"},
		{name: "running: floppy detach refused, nothing changed", example: "sysprep-floppy", action: "detach", floppy: true, active: true, code: result.CodeDomainRunning, msg: "is a floppy, which cannot be unplugged"},
		{name: "stopped: floppy detached", example: "sysprep-floppy", action: "detach", floppy: true, methods: []string{define}, detached: true},
		{name: "running: cdrom medium change", example: "sysprep-cdrom", action: "attach", cdrom: true, active: true, methods: []string{update, define}, kind: domxml.KindCDROM, bus: domxml.BusIDE},
		{name: "refused secret answer file, nothing changed", example: "sysprep-secret", action: "start", cdrom: true, brokenSecret: true, code: result.CodeInvalidJob, msg: "is not a Windows answer file"},
		{name: "missing password secret, nothing changed", example: "sysprep-floppy", action: "start", cdrom: true, extra: `{"admin_password_secret":"no-such-secret"}`, code: result.CodeInvalidJob, msg: `admin_password_secret: secret "no-such-secret" does not exist`},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("hsysprep-%d", i)
			f, d, e := fakeJobEngine(t, fakeDomainXML(name, false))
			e.SecretsDir = exampleSecrets
			if c.cdrom {
				if r := runDoc(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"hostname":"earlier","action":"attach"}`, name), "earlier"); r.State != result.StateDone {
					t.Fatalf("earlier job: %s %+v", r.State, r.Error)
				}
			}
			if c.floppy {
				if r := runDoc(t, e, sysprepDoc(t, "sysprep-floppy", name, "attach", ""), "earlier"); r.State != result.StateDone {
					t.Fatalf("earlier job: %s %+v", r.State, r.Error)
				}
			}
			if c.active {
				f.SetActive(d.UUID, true)
			}
			if c.brokenSecret {
				sd := t.TempDir()
				for _, n := range []string{"sysprep-admin-password"} {
					b, _ := os.ReadFile(filepath.Join(exampleSecrets, n))
					os.WriteFile(filepath.Join(sd, n), b, 0o600)
				}
				os.WriteFile(filepath.Join(sd, "sysprep-unattend"), []byte("<unattend>\n<Value>hunter2</Value>\n</unattend>\n"), 0o600)
				e.SecretsDir = sd
			}
			before, _ := f.Domain(context.Background(), d.UUID)
			files := func() []string { return testenv.DirNames(t, e.PayloadDir) }
			filesBefore := files()
			f.ResetCalls()
			r := runDoc(t, e, sysprepDoc(t, c.example, name, c.action, c.extra), "job")
			code := ""
			if r.Error != nil {
				code = r.Error.Code
			}
			if code != c.code || c.msg != "" && (r.Error == nil || !strings.Contains(r.Error.Message, c.msg)) {
				t.Fatalf("result %s %+v, want code %q saying %q", r.State, r.Error, c.code, c.msg)
			}
			if rj, _ := json.Marshal(r); bytes.Contains(rj, []byte("hunter2")) || bytes.Contains(rj, []byte("Adm1n")) {
				t.Errorf("the result quotes a secret: %s", rj)
			}
			if got := f.Methods(); !reflect.DeepEqual(got, c.methods) && !(len(got) == 0 && len(c.methods) == 0) {
				t.Errorf("libvirt changes %q, want %q", got, c.methods)
			}
			after, _ := f.Domain(context.Background(), d.UUID)
			if c.code != "" {
				if after.InactiveXML != before.InactiveXML {
					t.Errorf("a refused job changed the definition")
				}
				if got := files(); !reflect.DeepEqual(got, filesBefore) {
					t.Errorf("payload directory %v, before the job %v", got, filesBefore)
				}
				return
			}
			p, found, err := domxml.FindPayload(after.InactiveXML)
			if c.detached {
				if err != nil || found || strings.Contains(after.InactiveXML, recipe.Namespace) {
					t.Errorf("after the detach: payload drive %v (%v), recipe left: %v", found, err, strings.Contains(after.InactiveXML, recipe.Namespace))
				}
				return
			}
			if c.active {
				// a running domain's medium changed live; the definition's
				// drive is the fake's business: the recipe names the image
				p.Path = r.Payload.Path
			}
			if err != nil || !found || p.Kind != c.kind || p.Bus != c.bus || p.Path != r.Payload.Path {
				t.Fatalf("payload drive %+v (%v %v), want a %s on %s holding %s", p, found, err, c.kind, c.bus, r.Payload.Path)
			}
			if r.Device == nil || r.Device.Kind != string(c.kind) || r.Payload.Format != "sysprep" || r.Payload.Label != "SYSPREP" {
				t.Errorf("result device %+v payload %+v", r.Device, r.Payload)
			}
			if c.kind == domxml.KindFloppy {
				if r.Payload.Size != image.FloppySize {
					t.Errorf("floppy image of %d bytes", r.Payload.Size)
				}
				if b, err := exec.Command("mcopy", "-n", "-i", p.Path, "::/Unattend.xml", "-").Output(); err != nil || !bytes.Contains(b, []byte("<ComputerName>")) {
					t.Errorf("mcopy of the attached floppy: %v", err)
				}
			}
			// the hook: the recipe in the definition rebuilds the same bytes
			orig, _ := os.ReadFile(p.Path)
			rc, ok, err := recipe.FromDomainXML(after.InactiveXML)
			if err != nil || !ok || rc.Path != p.Path {
				t.Fatalf("recipe: %v %v", ok, err)
			}
			if strings.Contains(after.InactiveXML, "Adm1n") {
				t.Errorf("the domain XML holds the administrator password")
			}
			os.Remove(p.Path)
			if out, err := recipe.Rebuild(context.Background(), rc, recipe.RebuildOptions{PayloadDir: e.PayloadDir, SecretsDir: exampleSecrets, GID: -1}); err != nil || out != recipe.OutcomeRebuilt {
				t.Fatalf("Rebuild: %q %v", out, err)
			}
			if got, _ := os.ReadFile(p.Path); !bytes.Equal(got, orig) {
				t.Errorf("the rebuilt image differs")
			}
		})
	}
}

// TestFloppyCapable reads the domain capabilities libvirt 9.0 gave on this
// project's host (virsh domcapabilities, kept in testdata): i440FX and Q35
// list the "fdc" disk bus, a ppc64 pseries machine does not.
func TestFloppyCapable(t *testing.T) {
	for file, want := range map[string]bool{"x86_64-pc-7.2.xml": true, "x86_64-q35-7.2.xml": true, "ppc64-pseries-7.2.xml": false} {
		b, err := os.ReadFile(filepath.Join("testdata", "domcaps", file))
		if err != nil {
			t.Fatal(err)
		}
		got, machine, err := floppyCapable(string(b))
		if err != nil || got != want || machine == "" {
			t.Errorf("%s: floppy %v (machine %q, %v), want %v", file, got, machine, err, want)
		}
	}
	// a machine whose QEMU has no isa-fdc (RHEL's Q35): no fdc bus
	b, _ := os.ReadFile(filepath.Join("testdata", "domcaps", "x86_64-q35-7.2.xml"))
	if got, _, _ := floppyCapable(strings.Replace(string(b), "<value>fdc</value>", "", 1)); got {
		t.Errorf("a machine without the fdc bus takes a floppy")
	}
}

// TestSysprepMediumByMachine: a sysprep job that names no medium gets a
// floppy on a machine with a floppy controller and a CD-ROM on one
// without (the fake host answering with libvirt's real domain
// capabilities); an explicit floppy on a machine without one is refused,
// naming sysprep_medium, before anything changes (definition, payload
// directory, no libvirt change); where the host cannot say, the floppy
// stays the default. On the old code the job without a medium got a
// floppy on every machine.
func TestSysprepMediumByMachine(t *testing.T) {
	for i, c := range []struct {
		name, caps, extra string
		kind              domxml.Kind
		code              string
	}{
		{name: "pc: floppy", caps: "x86_64-pc-7.2.xml", kind: domxml.KindFloppy},
		{name: "q35: floppy", caps: "x86_64-q35-7.2.xml", kind: domxml.KindFloppy},
		{name: "no fdc: cdrom", caps: "ppc64-pseries-7.2.xml", kind: domxml.KindCDROM},
		{name: "no fdc, media iso: cdrom", caps: "ppc64-pseries-7.2.xml", extra: `{"media":"iso"}`, kind: domxml.KindCDROM},
		{name: "pc, explicit cdrom", caps: "x86_64-pc-7.2.xml", extra: `{"sysprep_medium":"cdrom"}`, kind: domxml.KindCDROM},
		{name: "no fdc, explicit floppy: refused", caps: "ppc64-pseries-7.2.xml", extra: `{"sysprep_medium":"floppy"}`, code: result.CodeUnsupported},
		{name: "no fdc, media vfat: refused", caps: "ppc64-pseries-7.2.xml", extra: `{"media":"vfat"}`, code: result.CodeUnsupported},
		{name: "host cannot say: floppy", kind: domxml.KindFloppy},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("hwinmedium-%d", i)
			f, d, e := fakeJobEngine(t, fakeDomainXML(name, false))
			e.SecretsDir = exampleSecrets
			if c.caps != "" {
				b, err := os.ReadFile(filepath.Join("testdata", "domcaps", c.caps))
				if err != nil {
					t.Fatal(err)
				}
				f.SetDomainCapabilities("", string(b))
			}
			f.ResetCalls()
			r := runDoc(t, e, sysprepDoc(t, "sysprep-floppy", name, "attach", c.extra), "job")
			after, _ := f.Domain(context.Background(), d.UUID)
			p, done := wantSysprepMedium(t, r, d.InactiveXML, after.InactiveXML, e.PayloadDir, c.kind, c.code)
			if !done {
				if m := f.Methods(); len(m) != 0 {
					t.Errorf("the refused job made libvirt changes %v", m)
				}
				return
			}
			wantMedia := map[domxml.Kind]string{domxml.KindFloppy: "vfat", domxml.KindCDROM: "iso"}[c.kind]
			if r.Payload.Media != wantMedia {
				t.Errorf("payload media %q, want %q", r.Payload.Media, wantMedia)
			}
			// the recipe records the medium chosen: the hook rebuilds the same bytes
			orig, _ := os.ReadFile(p.Path)
			rc, ok, err := recipe.FromDomainXML(after.InactiveXML)
			if err != nil || !ok || rc.Path != p.Path {
				t.Fatalf("recipe: %v %v", ok, err)
			}
			os.Remove(p.Path)
			if out, err := recipe.Rebuild(context.Background(), rc, recipe.RebuildOptions{PayloadDir: e.PayloadDir, SecretsDir: exampleSecrets, GID: -1}); err != nil || out != recipe.OutcomeRebuilt {
				t.Fatalf("Rebuild: %q %v", out, err)
			}
			if got, _ := os.ReadFile(p.Path); !bytes.Equal(got, orig) {
				t.Errorf("the rebuilt image differs")
			}
			if c.caps != "" && !strings.Contains(c.extra, "cdrom") && !strings.Contains(c.extra, "iso") {
				// an explicit CD-ROM fits every machine: nothing to ask
				var asked []string
				for _, call := range f.Calls() {
					if call.Method == "DomainCapabilities" {
						asked = append(asked, call.Arg)
					}
				}
				if !reflect.DeepEqual(asked, []string{"pc"}) {
					t.Errorf("domain capabilities asked for machines %q, want the domain's [pc]", asked)
				}
			}
		})
	}
}

// wantSysprepMedium checks the result r of a sysprep job that may name a
// medium, the domain's definition before and after it, and the payload
// directory dir. With code set the job must be refused on sysprep_medium
// for want of a floppy controller, with the definition and dir as they
// were; it returns done false. Else the job must be done with a payload
// drive of kind, which it returns.
func wantSysprepMedium(t *testing.T, r result.Result, before, after, dir string, kind domxml.Kind, code string) (p domxml.PayloadDisk, done bool) {
	t.Helper()
	if code != "" {
		if r.Error == nil || r.Error.Code != code || r.Error.Field != "sysprep_medium" || !strings.Contains(r.Error.Message, "has no floppy controller") {
			t.Fatalf("result %s %+v, want %s on sysprep_medium", r.State, r.Error, code)
		}
		if after != before {
			t.Errorf("the refused job changed the definition")
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("the refused job left %d files in the payload directory", len(ents))
		}
		return p, false
	}
	if r.State != result.StateDone || r.Device == nil || r.Device.Kind != string(kind) {
		t.Fatalf("result %s %+v device %+v, want a %s", r.State, r.Error, r.Device, kind)
	}
	p, found, err := domxml.FindPayload(after)
	if err != nil || !found || p.Kind != kind {
		t.Errorf("payload drive %+v (%v %v), want a %s", p, found, err, kind)
	}
	return p, true
}
