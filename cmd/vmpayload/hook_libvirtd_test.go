package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// The real-libvirtd test of the qemu hook. It installs the packaged hook
// script (pointed at a freshly built binary and a test configuration, and
// limited to this test's domain names) into /etc/libvirt/hooks/qemu.d,
// makes libvirtd re-read its hooks with SIGHUP and starts, fails to start,
// saves and restores a tiny TCG domain whose payload image was deleted.
// libvirtd is shared with other suites: it is never stopped or restarted,
// and the hook is removed (and libvirtd reloaded) in t.Cleanup.

const hookTestURI = "qemu:///system"

// virsh runs virsh on the system URI (testenv.VirshTry: it retries while
// another suite restarts libvirtd) and returns stdout and stderr together.
func virsh(t *testing.T, args ...string) (string, error) {
	return testenv.VirshTry(hookTestURI, args...)
}

// hookDirs makes a work directory named prefix* under /var/tmp (libvirt-qemu
// traverses it) with the payload directory (mode payloadMode) and the
// secrets directory (0700) in it.
func hookDirs(t *testing.T, prefix string, payloadMode os.FileMode) (base, payloadDir, secretsDir string) {
	t.Helper()
	base = testenv.WorkDir(t, prefix)
	payloadDir, secretsDir = filepath.Join(base, "payload"), filepath.Join(base, "secrets")
	must(t, os.Mkdir(payloadDir, payloadMode))
	must(t, os.Mkdir(secretsDir, 0o700))
	return base, payloadDir, secretsDir
}

// wantRebuiltAtStart removes r's file (what it is: image, config) as a host
// reboot would and starts the domain name: the hook must make the file
// again byte-identical before QEMU opens it, and the domain must run.
func wantRebuiltAtStart(t *testing.T, name, what string, r *recipe.Recipe) {
	t.Helper()
	must(t, os.Remove(r.Path))
	if o, err := virsh(t, "start", name); err != nil {
		t.Fatalf("virsh start with the %s deleted: %v %s", what, err, o)
	}
	if got := testenv.SumOf(r.Path); got != r.SHA256 {
		t.Fatalf("rebuilt %s sha256 %q, recorded %s", what, got, r.SHA256)
	}
	if o, _ := virsh(t, "domstate", name); strings.TrimSpace(o) != "running" {
		t.Errorf("domstate %q, want running", o)
	}
}

func TestLibvirtdHook(t *testing.T) {
	testenv.NeedLibvirtd(t)
	tag := testenv.RandHex(t, 4)
	name := "vmpayload-hooktest-" + tag

	// Everything under /var/tmp, traversable by libvirt-qemu.
	base, payloadDir, secretsDir := hookDirs(t, "vmpayload-hooktest-", 0o755)
	pw := filepath.Join(secretsDir, "pw")
	must(t, os.WriteFile(pw, []byte("s3cret\n"), 0o600))
	cfg := filepath.Join(base, "agent.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("payload_dir: %s\nsecrets_dir: %s\nhook_timeout: 20s\n", payloadDir, secretsDir)), 0o644))
	bin := agenttest.BinaryT(t)

	agenttest.InstallHook(t, tag, "vmpayload-hooktest-"+tag+"*", cfg, bin)

	// A tiny OS-less TCG domain with the payload drive and the recipe.
	uuid := fmt.Sprintf("%s-5a5a-4b4b-8c8c-%012x", tag, time.Now().UnixNano()&0xffffffffffff)
	dom := testenv.Domain{Name: name, UUID: uuid, Boot: "hd"}.XML()
	domPath, jobPath := filepath.Join(base, "dom.xml"), filepath.Join(base, "job.json")
	must(t, os.WriteFile(domPath, []byte(dom), 0o644))
	must(t, os.WriteFile(jobPath, []byte(strings.Replace(testJob, "hooktest", name, 2)), 0o644))
	out, err := exec.Command(bin, "recipe", "--payload-dir", payloadDir, "--secrets-dir", secretsDir, "--domain-xml", domPath, jobPath).Output()
	if err != nil {
		t.Fatalf("vmpayload recipe: %v", err)
	}
	full := filepath.Join(base, "full.xml")
	must(t, os.WriteFile(full, out, 0o644))
	r, ok, err := recipe.FromDomainXML(string(out))
	if err != nil || !ok {
		t.Fatalf("no recipe in the output: %v", err)
	}
	if o, err := virsh(t, "define", full); err != nil {
		t.Fatalf("virsh define: %v %s", err, o)
	}
	t.Cleanup(func() {
		virsh(t, "destroy", name)
		virsh(t, "undefine", name, "--managed-save")
	})

	// 1. Image deleted → start rebuilds it before QEMU opens it.
	wantRebuiltAtStart(t, name, "image", r)
	if o, _ := virsh(t, "domblklist", name); !strings.Contains(o, r.Path) {
		t.Errorf("domblklist lacks %s:\n%s", r.Path, o)
	}
	if o, _ := virsh(t, "dumpxml", name); !strings.Contains(o, r.SHA256) || !strings.Contains(o, "<source file='"+r.Path+"'") {
		t.Errorf("live XML lacks the image or its recipe")
	}

	// 2. save → delete the image → restore rebuilds it (restore begin).
	saved := filepath.Join(base, "saved")
	if o, err := virsh(t, "save", name, saved); err != nil {
		t.Errorf("virsh save: %v %s", err, o)
	} else {
		must(t, os.Remove(r.Path))
		if o, err := virsh(t, "restore", saved); err != nil {
			t.Errorf("virsh restore with the image deleted: %v %s", err, o)
		} else if got := testenv.SumOf(r.Path); got != r.SHA256 {
			t.Errorf("image after restore: sha256 %q, recorded %s", got, r.SHA256)
		}
		os.Remove(saved)
	}

	// 3. A vanished secret refuses the start with the hook's line.
	virsh(t, "destroy", name)
	must(t, os.Remove(r.Path))
	must(t, os.Rename(pw, pw+".away"))
	o, err := virsh(t, "start", name)
	if err == nil {
		t.Fatalf("virsh start succeeded with the secret gone:\n%s", o)
	}
	want := "vmpayload hook: domain " + name + ": rebuilding the payload image " + r.Path + ": users[0].password_secret: secret \"pw\" does not exist"
	if !strings.Contains(o, want) {
		t.Errorf("virsh start error lacks the hook's line %q:\n%s", want, o)
	}
	if _, err := os.Lstat(r.Path); err == nil {
		t.Errorf("an image was written although the secret is gone")
	}
	t.Logf("refused start: %s", strings.TrimSpace(o))

	// 4. The same under hook_failure: boot: the domain starts without its
	// payload (startupPolicy='optional' leaves the drive empty).
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("payload_dir: %s\nsecrets_dir: %s\nhook_failure: boot\n", payloadDir, secretsDir)), 0o644))
	if o, err := virsh(t, "start", name); err != nil {
		t.Errorf("virsh start under hook_failure: boot: %v %s", err, o)
	} else {
		if o, _ := virsh(t, "domstate", name); strings.TrimSpace(o) != "running" {
			t.Errorf("domstate %q, want running", o)
		}
		if _, err := os.Lstat(r.Path); err == nil {
			t.Errorf("an image was written although the secret is gone")
		}
		if o, _ := virsh(t, "dumpxml", name); strings.Contains(o, "<source file='"+r.Path+"'") {
			t.Errorf("the live drive names the missing image; want it empty")
		}
	}
	must(t, os.Rename(pw+".away", pw))

	// 5. Host reboot with autostart: the payload directory is empty and
	// libvirtd starts (and autostarts the domain) from scratch. Restarting
	// libvirtd is only allowed with VMPAYLOAD_LIBVIRTD_RESTART=1.
	if os.Getenv("VMPAYLOAD_LIBVIRTD_RESTART") != "1" {
		t.Log("autostart after a libvirtd restart: set VMPAYLOAD_LIBVIRTD_RESTART=1")
		return
	}
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("payload_dir: %s\nsecrets_dir: %s\n", payloadDir, secretsDir)), 0o644))
	virsh(t, "destroy", name)
	if o, err := virsh(t, "autostart", name); err != nil {
		t.Fatalf("virsh autostart: %v %s", err, o)
	}
	t.Cleanup(func() { virsh(t, "autostart", "--disable", name) })
	if err := os.Remove(r.Path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	restartLibvirtdAsAfterBoot(t)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		o, _ := virsh(t, "domstate", name)
		if strings.TrimSpace(o) == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("autostart domain not running 2 min after libvirtd started: %q", o)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got := testenv.SumOf(r.Path); got != r.SHA256 {
		t.Fatalf("image after autostart: sha256 %q, recorded %s", got, r.SHA256)
	}
	if o, _ := virsh(t, "dumpxml", name); !strings.Contains(o, "<source file='"+r.Path+"'") {
		t.Errorf("the autostarted domain's live drive lacks %s", r.Path)
	}
}

// restartLibvirtdAsAfterBoot stops libvirtd (SIGTERM; guests keep running)
// and starts it again with test/libvirtd.sh, first removing libvirt's
// "autostarted" marker so the daemon autostarts domains as after a host
// boot (libvirt autostarts once per boot: the marker lives in /run).
func restartLibvirtdAsAfterBoot(t *testing.T) {
	t.Helper()
	pid := agenttest.LibvirtdPID(t)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stopping libvirtd: %v", err)
	}
	for deadline := time.Now().Add(60 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if err := os.Remove("/run/libvirt/qemu/autostarted"); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "../../test/libvirtd.sh").CombinedOutput(); err != nil {
		t.Fatalf("starting libvirtd: %v\n%s", err, out)
	}
}

// TestLibvirtdRecipeMetadataSet: the recipe `vmpayload recipe` prints
// without --domain-xml is what docs/durability.md ("Without the agent")
// hands to `virsh metadata --set`; libvirt 9.0 takes it and the recipe read
// back from the definition is the one printed, naming the built image.
func TestLibvirtdRecipeMetadataSet(t *testing.T) {
	testenv.NeedLibvirtd(t)
	tag := testenv.RandHex(t, 4)
	name := "vmpayload-metaset-" + tag
	base, payloadDir, secretsDir := hookDirs(t, "vmpayload-metaset-", 0o755)
	must(t, os.WriteFile(filepath.Join(secretsDir, "pw"), []byte("s3cret\n"), 0o600))
	jobPath, drive := filepath.Join(base, "job.json"), filepath.Join(base, "drive.xml")
	must(t, os.WriteFile(jobPath, []byte(strings.Replace(testJob, "hooktest", name, 2)), 0o644))
	bin := agenttest.BinaryT(t)
	out, err := exec.Command(bin, "recipe", "--payload-dir", payloadDir, "--secrets-dir", secretsDir, "--drive-file", drive, jobPath).Output()
	if err != nil {
		t.Fatalf("vmpayload recipe: %v", err)
	}
	dom := filepath.Join(base, "dom.xml")
	must(t, os.WriteFile(dom, []byte(testenv.Domain{Name: name}.XML()), 0o644))
	if o, err := virsh(t, "define", dom); err != nil {
		t.Fatalf("virsh define: %v %s", err, o)
	}
	t.Cleanup(func() { _, _ = virsh(t, "undefine", name) })
	if o, err := virsh(t, "metadata", name, recipe.Namespace, "--key", "vmpayload", "--set", strings.TrimSpace(string(out)), "--config"); err != nil {
		t.Fatalf("virsh metadata --set with the printed recipe: %v %s", err, o)
	}
	if o, err := virsh(t, "attach-device", name, drive, "--config"); err != nil {
		t.Fatalf("virsh attach-device with the printed drive: %v %s", err, o)
	}
	x, err := virsh(t, "dumpxml", "--inactive", name)
	if err != nil {
		t.Fatalf("virsh dumpxml: %v %s", err, x)
	}
	r, ok, err := recipe.FromDomainXML(x)
	if err != nil || !ok {
		t.Fatalf("no recipe in the definition after virsh metadata --set (%v):\n%s", err, x)
	}
	if !strings.HasPrefix(r.Path, payloadDir+"/") || testenv.SumOf(r.Path) != r.SHA256 || !strings.Contains(x, r.Path) {
		t.Errorf("recipe names %s (sha256 %s); the definition:\n%s", r.Path, r.SHA256, x)
	}
}
