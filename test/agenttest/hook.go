package agenttest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// HookDir is where libvirt (≥ 6.5) finds its qemu hooks: every executable
// file in it runs, in name order.
const HookDir = "/etc/libvirt/hooks/qemu.d"

// HookScript returns the packaged hook script (packaging/libvirt/qemu-hook.sh)
// rewritten for a test: it execs bin's "vmpayload hook" with
// VMPAYLOAD_CONFIG=config instead of /usr/bin/vmpayload, and acts only on
// domains whose name starts with namePrefix (libvirtd is shared with other
// suites; every other domain's call only drains stdin).
func HookScript(bin, config, namePrefix string) (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("hook script: cannot locate the source tree")
	}
	path := filepath.Join(filepath.Dir(self), "..", "..", "packaging", "libvirt", "qemu-hook.sh")
	script, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("hook script: %w", err)
	}
	s := strings.Replace(string(script), "exec /usr/bin/vmpayload hook",
		"exec /usr/bin/env VMPAYLOAD_CONFIG="+config+" "+bin+" hook", 1)
	if s == string(script) {
		return "", errors.New("hook script: the packaged hook no longer execs /usr/bin/vmpayload hook")
	}
	t := strings.Replace(s, "\ncase \"$2 $3\" in", "\ncase \"$1\" in "+namePrefix+"*) ;; *) cat >/dev/null; exit 0 ;; esac\ncase \"$2 $3\" in", 1)
	if t == s {
		return "", errors.New("hook script: the packaged hook no longer dispatches on \"$2 $3\"")
	}
	return t, nil
}

// InstallHook writes HookScript(bin, config, namePrefix) into HookDir of
// the system libvirtd and makes the daemon read it (SIGHUP: a reload, never
// a restart, so running guests are not touched). The hook is removed, and
// libvirtd reloaded again, when tb ends.
func InstallHook(tb testing.TB, bin, config, namePrefix string) {
	tb.Helper()
	s, err := HookScript(bin, config, namePrefix)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(HookDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	file := filepath.Join(HookDir, "zz-vmpayload-test-"+strings.TrimSuffix(namePrefix, "-"))
	if err := os.WriteFile(file, []byte(s), 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		os.Remove(file)
		if err := ReloadLibvirtd(); err != nil {
			tb.Error(err)
		}
	})
	if err := ReloadLibvirtd(); err != nil {
		tb.Fatal(err)
	}
}

// LibvirtdPID is the pid of the libvirtd serving this /run: its pid file,
// not pgrep, which also sees daemons in other pid namespaces.
func LibvirtdPID() (int, error) {
	b, err := os.ReadFile("/run/libvirtd.pid")
	if err != nil {
		return 0, fmt.Errorf("no running libvirtd: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("libvirtd pid file: %q", b)
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "libvirtd" {
		return 0, fmt.Errorf("/run/libvirtd.pid names pid %d, which is not libvirtd", pid)
	}
	return pid, nil
}

// ReloadLibvirtd sends SIGHUP to the system libvirtd, which re-reads its
// hooks, and waits until it answers on qemu:///system again.
func ReloadLibvirtd() error {
	pid, err := LibvirtdPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("SIGHUP libvirtd %d: %w", pid, err)
	}
	time.Sleep(time.Second) // the reload runs in a libvirtd thread
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.Command("virsh", "-c", "qemu:///system", "version").CombinedOutput()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("libvirtd does not answer after SIGHUP: %v %s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
