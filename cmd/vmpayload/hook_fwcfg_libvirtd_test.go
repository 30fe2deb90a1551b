package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestLibvirtdFwCfg: an Ignition config delivered by fw_cfg on the real
// libvirtd (issue 34). A tiny OS-less TCG domain made with `vmpayload
// recipe --domain-xml` (the <sysinfo type='fwcfg'> entries and the recipe)
// starts, and its QEMU gets both entries from the file; libvirt's DAC
// driver (dynamic_ownership, Debian's default) hands the file to QEMU's
// user while the domain runs and gives it back when it stops; with the
// file deleted (a host reboot), `virsh start` runs the hook, which rebuilds
// it byte-identical before QEMU reads it; a file removed while the domain
// runs does not fail its stop; and with DAC relabelling off for
// the domain, QEMU reads the file through the payload directory's rules
// alone (mode 0640, image_group QEMU's group). virt-aa-helper (AppArmor's
// profile generator, run dry) gives QEMU read access to the file.
func TestLibvirtdFwCfg(t *testing.T) {
	testenv.NeedLibvirtd(t)
	tag := testenv.RandHex(t, 4)
	name := "vmpayload-hooktest-" + tag + "-fwcfg"

	base, payloadDir, secretsDir := hookDirs(t, "vmpayload-fwcfgtest-", 0o711) // the agent's payload directory mode
	cfg := filepath.Join(base, "agent.yaml")
	writeCfg := func(extra string) {
		must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("payload_dir: %s\nsecrets_dir: %s\nhook_timeout: 20s\n%s", payloadDir, secretsDir, extra)), 0o644))
	}
	writeCfg("")
	bin := agenttest.BinaryT(t)
	agenttest.InstallHook(t, tag, "vmpayload-hooktest-"+tag+"*", cfg, bin)

	uuid := fmt.Sprintf("%s-5a5a-4b4b-8c8c-%012x", tag, time.Now().UnixNano()&0xffffffffffff)
	domXML := func(seclabel string) string {
		return testenv.Domain{Name: name, UUID: uuid, Boot: "hd", Tail: seclabel}.XML()
	}
	const job = `{"version":1,"domain":"fc","format":"ignition","hostname":"fc.example.com","users":[{"name":"core","password":"plain-core","ssh_authorized_keys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ9UCj6yFbzrJRqgbKp1+pjOWpNQWIeq40ujmhEHvz3p core@x"]}]}`
	jobPath := filepath.Join(base, "job.json")
	must(t, os.WriteFile(jobPath, []byte(job), 0o644))
	define := func(seclabel string, args ...string) *recipe.Recipe {
		t.Helper()
		domPath := filepath.Join(base, "dom.xml")
		must(t, os.WriteFile(domPath, []byte(domXML(seclabel)), 0o644))
		cmd := exec.Command(bin, append([]string{"recipe", "--payload-dir", payloadDir, "--secrets-dir", secretsDir, "--domain-xml", domPath}, append(args, jobPath)...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("vmpayload recipe: %v", err)
		}
		full := filepath.Join(base, "full.xml")
		must(t, os.WriteFile(full, out, 0o644))
		if o, err := virsh(t, "define", full); err != nil {
			t.Fatalf("virsh define: %v %s", err, o)
		}
		r, ok, err := recipe.FromDomainXML(string(out))
		if err != nil || !ok {
			t.Fatalf("no recipe in the output: %v", err)
		}
		return r
	}
	r := define("")
	t.Cleanup(func() {
		virsh(t, "destroy", name)
		virsh(t, "undefine", name)
	})
	if o, _ := virsh(t, "dumpxml", "--inactive", name); strings.Count(o, "file='"+r.Path+"'") != 2 || !strings.Contains(o, "<sysinfo type='fwcfg'>") {
		t.Fatalf("libvirt's definition lacks the two fw_cfg entries naming %s:\n%s", r.Path, o)
	}
	owner := func() string {
		var st syscall.Stat_t
		if err := syscall.Stat(r.Path, &st); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%d:%d %#o", st.Uid, st.Gid, st.Mode&0o777)
	}
	before := owner()

	// AppArmor (not enabled here): libvirt's virt-aa-helper, in its dry
	// run, puts the fw_cfg file into the domain's profile, read-only.
	if _, err := os.Stat("/usr/lib/libvirt/virt-aa-helper"); err == nil {
		inactive, _ := virsh(t, "dumpxml", "--inactive", name)
		cmd := exec.Command("/usr/lib/libvirt/virt-aa-helper", "--dryrun", "--create", "--uuid", "libvirt-"+uuid)
		cmd.Stdin = strings.NewReader(inactive)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"`+r.Path+`" r,`) {
			t.Errorf("virt-aa-helper --dryrun: %v; want a read rule for %s:\n%s", err, r.Path, out)
		}
	}

	// 1. A plain start: QEMU gets both entries from the file.
	if o, err := virsh(t, "start", name); err != nil {
		t.Fatalf("virsh start: %v %s", err, o)
	}
	args := testenv.QEMUCmdline(t, name)
	for _, n := range []string{"opt/com.coreos/config", "opt/org.flatcar-linux/config"} {
		if !strings.Contains(args, "name="+n+",file="+r.Path) {
			t.Errorf("QEMU's command line lacks the fw_cfg entry %s naming %s:\n%s", n, r.Path, args)
		}
	}
	running := owner()
	virsh(t, "destroy", name)
	after := owner()
	t.Logf("DAC: the config file is %s before the start, %s while the domain runs, %s after it stopped", before, running, after)
	if u, err := user.Lookup("libvirt-qemu"); err == nil && !strings.HasPrefix(running, u.Uid+":") {
		t.Logf("QEMU's user %s did not own the file while the domain ran (dynamic_ownership off?)", u.Uid)
	}
	if after != before {
		t.Errorf("ownership after the stop %s, before the start %s: libvirt did not restore it", after, before)
	}

	// 2. The file is gone (a host reboot emptied the payload directory):
	// the hook rebuilds it at prepare begin, before QEMU reads it.
	wantRebuiltAtStart(t, name, "config", r)
	// The file removed while the domain runs (as the agent removes a
	// superseded config): QEMU read it at launch, and the stop, which
	// gives the file's owner back, does not fail for it.
	must(t, os.Remove(r.Path))
	if o, err := virsh(t, "destroy", name); err != nil {
		t.Errorf("virsh destroy with the config removed while running: %v %s", err, o)
	}

	// 3. No DAC relabelling for this domain (a static label: QEMU runs as
	// libvirt-qemu, and nothing is chowned): QEMU reads the file by its
	// group, image_group, and the mode 0640.
	u, err := user.Lookup("libvirt-qemu")
	if err != nil {
		t.Skipf("no user libvirt-qemu: %v", err)
	}
	g, err := user.LookupGroup("libvirt-qemu")
	if err != nil {
		t.Skipf("no group libvirt-qemu: %v", err)
	}
	r = define(fmt.Sprintf("\n  <seclabel type='static' model='dac' relabel='no'><label>+%s:+%s</label></seclabel>", u.Uid, g.Gid))
	// without image_group (root's group) QEMU cannot read it: the start
	// fails, so the group is what lets it read below
	must(t, os.Remove(r.Path))
	if o, err := virsh(t, "start", name); err == nil {
		t.Errorf("virsh start succeeded with the config 0640 root:root and no relabelling")
		virsh(t, "destroy", name)
	} else {
		t.Logf("without image_group: %s", strings.TrimSpace(o))
	}
	writeCfg("image_group: libvirt-qemu\nimage_mode: \"0640\"\n")
	must(t, os.Remove(r.Path))
	if o, err := virsh(t, "start", name); err != nil {
		t.Fatalf("virsh start without DAC relabelling: %v %s", err, o)
	}
	gid, _ := strconv.Atoi(g.Gid)
	var st syscall.Stat_t
	must(t, syscall.Stat(r.Path, &st))
	if int(st.Gid) != gid || st.Mode&0o777 != 0o640 || st.Uid != 0 {
		t.Errorf("rebuilt config %d:%d %#o, want 0:%d 0640 (not relabelled)", st.Uid, st.Gid, st.Mode&0o777, gid)
	}
	if got := testenv.SumOf(r.Path); got != r.SHA256 {
		t.Errorf("rebuilt config sha256 %q, recorded %s", got, r.SHA256)
	}
	if o, _ := virsh(t, "domstate", name); strings.TrimSpace(o) != "running" {
		t.Errorf("domstate %q, want running", o)
	}
	var during syscall.Stat_t
	must(t, syscall.Stat(r.Path, &during))
	if during.Uid != 0 || int(during.Gid) != gid {
		t.Errorf("the config was relabelled to %d:%d although the domain says relabel='no'", during.Uid, during.Gid)
	}
	virsh(t, "destroy", name)
}
