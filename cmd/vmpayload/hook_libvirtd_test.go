package main

import (
	"fmt"
	"os"
	"os/exec"
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

// The real-libvirtd test of the qemu hook. It installs the packaged hook
// script (pointed at a freshly built binary and a test configuration, and
// limited to this test's domain names) into /etc/libvirt/hooks/qemu.d,
// makes libvirtd re-read its hooks with SIGHUP and starts, fails to start,
// saves and restores a tiny TCG domain whose payload image was deleted.
// libvirtd is shared with other suites: it is never stopped or restarted,
// and the hook is removed (and libvirtd reloaded) in t.Cleanup.

const hookTestURI = "qemu:///system"

// virsh runs virsh on the system URI, retrying connection errors (another
// suite may be restarting libvirtd).
func virsh(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out []byte
	var err error
	for i := 0; i < 30; i++ {
		out, err = exec.Command("virsh", append([]string{"-c", hookTestURI}, args...)...).CombinedOutput()
		if err == nil || !isTransient(string(out)) {
			break
		}
		time.Sleep(time.Second)
	}
	return string(out), err
}

func isTransient(out string) bool {
	for _, s := range []string{"failed to connect", "Failed to connect", "End of file while reading data", "Cannot recv data", "Broken pipe"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// reloadLibvirtd sends SIGHUP to the running libvirtd (which re-reads its
// hooks) and waits until it answers again.
func reloadLibvirtd(t *testing.T) {
	t.Helper()
	pid := libvirtdPID(t)
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatalf("SIGHUP libvirtd %d: %v", pid, err)
	}
	time.Sleep(time.Second) // the reload runs in a libvirtd thread
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.Command("virsh", "-c", hookTestURI, "version").CombinedOutput()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("libvirtd does not answer after SIGHUP: %v %s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func TestLibvirtdHook(t *testing.T) {
	testenv.NeedLibvirtd(t)
	tag := testenv.RandHex(t, 4)
	name := "vmpayload-hooktest-" + tag

	// Everything under /var/tmp, traversable by libvirt-qemu.
	base := testenv.WorkDir(t, "vmpayload-hooktest-")
	payloadDir, secretsDir := filepath.Join(base, "payload"), filepath.Join(base, "secrets")
	must(t, os.Mkdir(payloadDir, 0o755))
	must(t, os.Mkdir(secretsDir, 0o700))
	pw := filepath.Join(secretsDir, "pw")
	must(t, os.WriteFile(pw, []byte("s3cret\n"), 0o600))
	cfg := filepath.Join(base, "agent.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("payload_dir: %s\nsecrets_dir: %s\nhook_timeout: 20s\n", payloadDir, secretsDir)), 0o644))
	bin := agenttest.BinaryT(t)

	// The packaged script, pointed at the test binary and configuration and
	// acting only on this test's domains (other suites share libvirtd).
	script, err := os.ReadFile("../../packaging/libvirt/qemu-hook.sh")
	must(t, err)
	s := strings.Replace(string(script), "exec /usr/bin/vmpayload hook",
		"exec /usr/bin/env VMPAYLOAD_CONFIG="+cfg+" "+bin+" hook", 1)
	if s == string(script) {
		t.Fatal("the packaged hook script no longer execs /usr/bin/vmpayload hook")
	}
	s = strings.Replace(s, "\ncase \"$2 $3\" in", "\ncase \"$1\" in vmpayload-hooktest-"+tag+"*) ;; *) cat >/dev/null; exit 0 ;; esac\ncase \"$2 $3\" in", 1)
	hookDir := "/etc/libvirt/hooks/qemu.d"
	must(t, os.MkdirAll(hookDir, 0o755))
	hookFile := filepath.Join(hookDir, "zz-vmpayload-test-"+tag)
	must(t, os.WriteFile(hookFile, []byte(s), 0o755))
	t.Cleanup(func() {
		os.Remove(hookFile)
		reloadLibvirtd(t)
	})
	reloadLibvirtd(t)

	// A tiny OS-less TCG domain with the payload drive and the recipe.
	uuid := fmt.Sprintf("%s-5a5a-4b4b-8c8c-%012x", tag, time.Now().UnixNano()&0xffffffffffff)
	dom := fmt.Sprintf(`<domain type='qemu'>
  <name>%s</name>
  <uuid>%s</uuid>
  <memory unit='MiB'>48</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <boot dev='hd'/>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <memballoon model='none'/>
  </devices>
</domain>`, name, uuid)
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
	must(t, os.Remove(r.Path))
	if o, err := virsh(t, "start", name); err != nil {
		t.Fatalf("virsh start with the image deleted: %v %s", err, o)
	}
	if got := fileSHA256(t, r.Path); got != r.SHA256 {
		t.Fatalf("rebuilt image sha256 %q, recorded %s", got, r.SHA256)
	}
	if o, _ := virsh(t, "domstate", name); strings.TrimSpace(o) != "running" {
		t.Errorf("domstate %q, want running", o)
	}
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
		} else if got := fileSHA256(t, r.Path); got != r.SHA256 {
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
	if got := fileSHA256(t, r.Path); got != r.SHA256 {
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
	pid := libvirtdPID(t)
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

// libvirtdPID is the pid of the libvirtd serving this /run (its pid file;
// not pgrep, which also sees daemons in other pid namespaces).
func libvirtdPID(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/run/libvirtd.pid")
	if err != nil {
		t.Fatalf("no running libvirtd: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("libvirtd pid file: %q", b)
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "libvirtd" {
		t.Fatalf("/run/libvirtd.pid names pid %d, which is not libvirtd", pid)
	}
	return pid
}
