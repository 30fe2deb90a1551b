package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestLibvirtdSysprep: the real libvirtd (9.0) and QEMU accept a sysprep
// payload drive — a floppy on i440FX and on Q35 (libvirt adds an isa-fdc
// there), a CD-ROM on Q35 — in an OS-less TCG domain that `vmpayload
// recipe` wrote: the domain starts. With the domain stopped and the image
// deleted, the hook (`vmpayload hook NAME prepare begin -`, the domain XML
// libvirt holds on stdin) rebuilds it with the recorded sha256, and the
// domain starts again. mtools and isoinfo -J, readers independent of
// vmpayload's, find the answer file in the rebuilt image.
func TestLibvirtdSysprep(t *testing.T) {
	testenv.NeedLibvirtd(t)
	bin := agenttest.BinaryT(t)
	tag := testenv.RandHex(t, 4)
	base := testenv.WorkDir(t, "vmpx-sysprep-")
	payloadDir := filepath.Join(base, "payload")
	must(t, os.Mkdir(payloadDir, 0o755))
	secretsDir, err := filepath.Abs("../../configs/examples/secrets")
	must(t, err)
	cfg := filepath.Join(base, "agent.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("payload_dir: %s\nsecrets_dir: %s\nhook_timeout: 20s\n", payloadDir, secretsDir)), 0o644))
	for i, c := range []struct {
		name, machine, example string
		kind                   domxml.Kind
	}{
		{"floppy-pc", "pc", "sysprep-floppy", domxml.KindFloppy},
		{"floppy-q35", "q35", "sysprep-secret", domxml.KindFloppy},
		{"cdrom-q35", "q35", "sysprep-cdrom", domxml.KindCDROM},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "vmpx-sysprep-" + tag + "-" + c.name
			dom := testenv.Domain{Name: name, UUID: fmt.Sprintf("%s-5a5a-4b4b-8c8c-%012d", tag, i), Machine: c.machine}.XML()
			dir := t.TempDir()
			domPath := filepath.Join(dir, "dom.xml")
			must(t, os.WriteFile(domPath, []byte(dom), 0o644))
			jobPath := filepath.Join("../../configs/examples/windows", c.example+".json")
			out, err := exec.Command(bin, "recipe", "--payload-dir", payloadDir, "--secrets-dir", secretsDir, "--domain-xml", domPath, jobPath).Output()
			if err != nil {
				t.Fatalf("vmpayload recipe: %v", err)
			}
			r, ok, err := recipe.FromDomainXML(string(out))
			if err != nil || !ok {
				t.Fatalf("no recipe in the output: %v", err)
			}
			// the job is sealed in the recipe: open it with the key the
			// recipe command made in the secrets directory
			keys, err := seal.Load(recipe.KeyFile(secretsDir))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Open(keys); err != nil {
				t.Fatalf("opening the sealed recipe: %v", err)
			}
			p, found, err := domxml.FindPayload(string(out))
			if err != nil || !found || p.Kind != c.kind || p.Path != r.Path {
				t.Fatalf("payload drive %+v (%v %v), want a %s", p, found, err, c.kind)
			}
			full := filepath.Join(dir, "full.xml")
			must(t, os.WriteFile(full, out, 0o644))
			if o, err := virsh(t, "define", full); err != nil {
				t.Fatalf("virsh define: %v %s", err, o)
			}
			t.Cleanup(func() {
				virsh(t, "destroy", name)
				virsh(t, "undefine", name)
			})
			if o, err := virsh(t, "start", name); err != nil {
				t.Fatalf("virsh start: %v %s", err, o)
			}
			live, _ := virsh(t, "dumpxml", name)
			if !strings.Contains(live, "device='"+string(c.kind)+"'") || !strings.Contains(live, "<source file='"+r.Path+"'") {
				t.Errorf("the live definition lacks the %s with %s:\n%s", c.kind, r.Path, live)
			}
			if o, err := virsh(t, "destroy", name); err != nil {
				t.Fatalf("virsh destroy: %v %s", err, o)
			}

			// the hook rebuilds the deleted image from the recipe libvirt holds
			must(t, os.Remove(r.Path))
			inactive, err := virsh(t, "dumpxml", "--inactive", name)
			if err != nil {
				t.Fatalf("virsh dumpxml --inactive: %v %s", err, inactive)
			}
			hook := exec.Command(bin, "hook", name, "prepare", "begin", "-")
			hook.Env = append(os.Environ(), "VMPAYLOAD_CONFIG="+cfg)
			hook.Stdin = strings.NewReader(inactive)
			if o, err := hook.CombinedOutput(); err != nil {
				t.Fatalf("vmpayload hook: %v %s", err, o)
			}
			if got := testenv.SumOf(r.Path); got != r.SHA256 {
				t.Fatalf("the hook's image has sha256 %s, the recipe %s", got, r.SHA256)
			}
			var text []byte
			if c.kind == domxml.KindFloppy {
				text, err = exec.Command("mcopy", "-n", "-i", r.Path, "::/"+r.Job.SysprepFileName, "-").Output()
			} else {
				text, err = exec.Command("isoinfo", "-J", "-i", r.Path, "-x", "/"+r.Job.SysprepFileName).Output()
			}
			if err != nil || !bytes.Contains(text, []byte("<ComputerName>"+r.Job.Hostname+"</ComputerName>")) {
				t.Errorf("the answer file read back from the rebuilt image (%v):\n%s", err, text)
			}
			if o, err := virsh(t, "start", name); err != nil {
				t.Fatalf("virsh start with the rebuilt image: %v %s", err, o)
			}
			if o, _ := virsh(t, "domstate", name); strings.TrimSpace(o) != "running" {
				t.Errorf("domstate %q, want running", o)
			}
		})
	}
}
