package agenttest

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

	"github.com/vmpayload/vmpayload/test/testenv"
)

// InstallHook installs the packaged libvirt qemu hook script
// (packaging/libvirt/qemu-hook.sh) into /etc/libvirt/hooks/qemu.d as
// zz-vmpayload-test-TAG, pointed at the vmpayload binary bin and the agent
// configuration cfg and acting only on the domains whose names match the
// shell pattern domains (libvirtd is shared with other tests); it reloads
// libvirtd (SIGHUP: hooks are found when the daemon starts or reloads) and
// removes the hook, reloading again, when tb ends.
func InstallHook(tb testing.TB, tag, domains, cfg, bin string) {
	tb.Helper()
	script, err := os.ReadFile(testenv.RepoPath("packaging", "libvirt", "qemu-hook.sh"))
	if err != nil {
		tb.Fatal(err)
	}
	s := strings.Replace(string(script), "exec /usr/bin/vmpayload hook",
		"exec /usr/bin/env VMPAYLOAD_CONFIG="+cfg+" "+bin+" hook", 1)
	if s == string(script) {
		tb.Fatal("the packaged hook script no longer execs /usr/bin/vmpayload hook")
	}
	s = strings.Replace(s, "\ncase \"$2 $3\" in", "\ncase \"$1\" in "+domains+") ;; *) cat >/dev/null; exit 0 ;; esac\ncase \"$2 $3\" in", 1)
	hookDir := "/etc/libvirt/hooks/qemu.d"
	if err := os.MkdirAll(hookDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	hookFile := filepath.Join(hookDir, "zz-vmpayload-test-"+tag)
	if err := os.WriteFile(hookFile, []byte(s), 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		os.Remove(hookFile)
		ReloadLibvirtd(tb)
	})
	ReloadLibvirtd(tb)
}

// ReloadLibvirtd sends SIGHUP to the running libvirtd (which re-reads its
// hooks) and waits until it answers again.
func ReloadLibvirtd(tb testing.TB) {
	tb.Helper()
	pid := LibvirtdPID(tb)
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		tb.Fatalf("SIGHUP libvirtd %d: %v", pid, err)
	}
	time.Sleep(time.Second) // the reload runs in a libvirtd thread
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.Command("virsh", "-c", "qemu:///system", "version").CombinedOutput()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("libvirtd does not answer after SIGHUP: %v %s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// LibvirtdPID is the pid of the libvirtd serving this /run (its pid file;
// not pgrep, which also sees daemons in other pid namespaces).
func LibvirtdPID(tb testing.TB) int {
	tb.Helper()
	b, err := os.ReadFile("/run/libvirtd.pid")
	if err != nil {
		tb.Fatalf("no running libvirtd: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		tb.Fatalf("libvirtd pid file: %q", b)
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "libvirtd" {
		tb.Fatalf("/run/libvirtd.pid names pid %d, which is not libvirtd", pid)
	}
	return pid
}
