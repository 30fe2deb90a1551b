package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

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
