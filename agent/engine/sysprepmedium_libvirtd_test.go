package engine

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestLibvirtdSysprepMediumByMachine runs sysprep jobs that name no medium
// on the real libvirtd: on an i440FX (pc) domain the agent reads libvirt's
// domain capabilities, finds the floppy controller and attaches a floppy,
// and QEMU starts the domain with it; on a ppc64 pseries domain (Debian's
// qemu-system-ppc: no floppy controller) it attaches a CD-ROM, and an
// explicit sysprep_medium "floppy" there is refused by name with the
// definition as it was.
func TestLibvirtdSysprepMediumByMachine(t *testing.T) {
	h := systemHost(t, quietLog())
	for _, c := range []struct {
		name, arch, machine, emulator, action, extra string
		kind                                         domxml.Kind
		code                                         string
	}{
		{"pc", "x86_64", "pc", "/usr/bin/qemu-system-x86_64", "start", "", domxml.KindFloppy, ""},
		{"pseries", "ppc64", "pseries", "/usr/bin/qemu-system-ppc64", "attach", "", domxml.KindCDROM, ""},
		{"pseries-floppy", "ppc64", "pseries", "/usr/bin/qemu-system-ppc64", "attach", `{"sysprep_medium":"floppy"}`, "", result.CodeUnsupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := os.Stat(c.emulator); err != nil {
				t.Fatalf("%s is missing (test/deps.sh installs it): %v", c.emulator, err)
			}
			ctx := context.Background()
			dir := testenv.TempDir(t, "/var/tmp", "hwin-medium-", 0o755) // libvirt-qemu must reach the images
			name := fmt.Sprintf("hwin-medium-%s-%d", c.name, os.Getpid())
			dom := defineReal(t, h, testenv.Domain{Name: name, MemoryMiB: 256, Arch: c.arch, Machine: c.machine, Devices: "<controller type='scsi' index='0' model='virtio-scsi'/>"}.XML())
			e := realEngine(h, dir)
			e.SecretsDir, e.Metrics = exampleSecrets, metrics.New()
			r := runDoc(t, e, sysprepDoc(t, "sysprep-floppy", name, c.action, c.extra), "job")
			after, err := h.Domain(ctx, dom.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if _, done := wantSysprepMedium(t, r, dom.InactiveXML, after.InactiveXML, dir, c.kind, c.code); done && c.action == "start" && !after.Active {
				t.Errorf("the domain did not start")
			}
		})
	}
}
