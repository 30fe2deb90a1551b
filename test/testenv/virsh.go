package testenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SystemURI is the shared libvirtd's URI (test/libvirtd.sh), or, inside
// test/hosts.sh's namespaces, that host's private daemon.
const SystemURI = "qemu:///system"

// VirshRetryFor bounds how long Virsh retries a transient failure; a
// deadline for a daemon that does not come back, not a timing assertion.
const VirshRetryFor = 60 * time.Second

// transientVirsh marks virsh failures caused by the daemon being briefly
// away (a test that restarts libvirtd, another package's reconnect test):
// the one rule every test's virsh call retries by.
var transientVirsh = []string{
	"failed to connect to the hypervisor",
	"Failed to connect socket",
	"End of file while reading data",
	"Cannot recv data",
	"Connection reset by peer",
	"Broken pipe",
	"Cannot write data",
	"client socket is closed",
	"no connection driver available",
}

// TransientVirsh reports whether virsh's error output msg says libvirtd
// was away rather than that the operation failed.
func TransientVirsh(msg string) bool {
	for _, t := range transientVirsh {
		if strings.Contains(msg, t) {
			return true
		}
	}
	return false
}

// VirshRun runs `virsh -q -c uri args...` and returns its stdout and
// stderr. A failure TransientVirsh recognises is retried every second for
// up to VirshRetryFor; a virsh killed by a signal, or any other failure, is
// returned at once. err says which command failed and quotes stderr.
func VirshRun(ctx context.Context, uri string, args ...string) (stdout, stderr string, err error) {
	var deadline time.Time // set at the first transient failure
	for attempt := 1; ; attempt++ {
		cmd := exec.CommandContext(ctx, "virsh", append([]string{"-q", "-c", uri}, args...)...)
		var eb strings.Builder
		cmd.Stderr = &eb
		out, err := cmd.Output()
		if err == nil {
			return string(out), eb.String(), nil
		}
		msg := strings.TrimSpace(eb.String())
		retry := TransientVirsh(msg)
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ProcessState != nil {
			if ws, ok := ee.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				retry = false
			}
		}
		if retry && deadline.IsZero() {
			deadline = time.Now().Add(VirshRetryFor)
		}
		if !retry || time.Now().After(deadline) || ctx.Err() != nil {
			return string(out), eb.String(), fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, msg)
		}
		slog.Warn("virsh: libvirtd unavailable, retrying", "args", args, "attempt", attempt, "err", msg)
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("virsh %s: %w", strings.Join(args, " "), ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// Virsh is VirshRun's stdout and error.
func Virsh(ctx context.Context, uri string, args ...string) (string, error) {
	out, _, err := VirshRun(ctx, uri, args...)
	return out, err
}

// VirshTry is VirshRun on uri with stdout and stderr joined and trimmed, for
// a test that reads what a failed operation said (a hook's refusal).
func VirshTry(uri string, args ...string) (string, error) {
	out, eb, err := VirshRun(context.Background(), uri, args...)
	return strings.TrimSpace(out + eb), err
}

// VirshT runs virsh on uri, fails tb on an error, and returns stdout
// trimmed.
func VirshT(tb testing.TB, uri string, args ...string) string {
	tb.Helper()
	out, err := Virsh(context.Background(), uri, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// QEMUCmdline returns the command line (arguments joined by spaces) of the
// QEMU process of the running domain named domain, found through
// libvirt's pid file under /run/libvirt/qemu, as every host user can read
// it; it fails tb when either cannot be read.
func QEMUCmdline(tb testing.TB, domain string) string {
	tb.Helper()
	pid, err := os.ReadFile("/run/libvirt/qemu/" + domain + ".pid")
	if err != nil {
		tb.Fatalf("QEMU's pid file: %v", err)
	}
	b, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/cmdline")
	if err != nil {
		tb.Fatalf("QEMU's command line: %v", err)
	}
	return strings.ReplaceAll(string(b), "\x00", " ")
}
