// Package testenv holds the gates and small set-up steps that tests in
// every layer share (libvirt shims, engine, agent, CLI, test suites): the
// VMPAYLOAD_LIBVIRTD gate, unique names, work directories the QEMU user can
// traverse. It imports only the standard library, so any package's tests
// may use it without an import cycle. Only tests import it.
package testenv

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// NeedLibvirtd skips tb unless VMPAYLOAD_LIBVIRTD=1 (set by make test after
// test/libvirtd.sh has started the daemons) and fails it when that is set
// but the process is not root (qemu:///system needs root).
func NeedLibvirtd(tb testing.TB) {
	tb.Helper()
	if os.Getenv("VMPAYLOAD_LIBVIRTD") != "1" {
		tb.Skip("real-libvirtd test: set VMPAYLOAD_LIBVIRTD=1 after running test/libvirtd.sh (make test does both)")
	}
	if os.Geteuid() != 0 {
		tb.Fatal("VMPAYLOAD_LIBVIRTD=1 but not root: qemu:///system tests need root")
	}
}

// NeedE2E skips tb unless VMPAYLOAD_E2E=1 (make test sets it) and the
// process is root: real guests are built and booted through qemu:///system.
// what says what the test does ("boot real guests through the agent").
func NeedE2E(tb testing.TB, what string) {
	tb.Helper()
	if os.Getenv("VMPAYLOAD_E2E") != "1" {
		tb.Skipf("set VMPAYLOAD_E2E=1 to %s (needs root, libvirtd, qemu, mmdebstrap)", what)
	}
	if os.Geteuid() != 0 {
		tb.Skipf("VMPAYLOAD_E2E=1 but not root: %s needs root for qemu:///system", what)
	}
}

// NeedLibvirtdRestart skips tb unless VMPAYLOAD_LIBVIRTD_RESTART=1 as well
// (make test sets both and runs packages one at a time): a test that stops,
// kills or restarts the shared libvirtd would break every test running
// against it at the same time. test/hosts.sh sandbox runs such tests against
// a private libvirtd. what says what the test does to libvirtd.
func NeedLibvirtdRestart(tb testing.TB, what string) {
	tb.Helper()
	NeedLibvirtd(tb)
	if os.Getenv("VMPAYLOAD_LIBVIRTD_RESTART") != "1" {
		tb.Skip(what + " the shared libvirtd: set VMPAYLOAD_LIBVIRTD_RESTART=1 (or run test/hosts.sh sandbox, which uses a private libvirtd)")
	}
}

// RandHex returns n random bytes in hex, for names that must not collide
// with other tests running at the same time.
func RandHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// WorkDir makes a directory named prefix* under /var/tmp that the QEMU user
// (libvirt-qemu) can traverse (0711; t.TempDir under /tmp is 0700), removed
// when tb ends.
func WorkDir(tb testing.TB, prefix string) string {
	tb.Helper()
	return TempDir(tb, "/var/tmp", prefix, 0o711)
}

// TempDir makes a directory named prefix* in parent (os.TempDir when
// empty) with mode (0700, as os.MkdirTemp makes it, when 0), removed when
// tb ends.
func TempDir(tb testing.TB, parent, prefix string, mode os.FileMode) string {
	tb.Helper()
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if mode != 0 {
		if err := os.Chmod(dir, mode); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// LockedBuffer collects output (a test's log handler) that several
// goroutines write at once.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// RepoPath returns the path of the repository file named by elem (relative
// to the repository's root), found from this source file's place, so that a
// test or test tool in any directory reaches the scripts under test/.
func RepoPath(elem ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", ".."}, elem...)...)
}

// DirNames lists the names in dir, sorted (nil when dir does not exist);
// it fails tb when dir cannot be read.
func DirNames(tb testing.TB, dir string) []string {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

// EmptyDir removes everything in dir and keeps dir (a host reboot's tmpfs);
// it fails tb on an error.
func EmptyDir(tb testing.TB, dir string) {
	tb.Helper()
	for _, n := range DirNames(tb, dir) {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			tb.Fatal(err)
		}
	}
}

// ListenUnix listens on the Unix socket path, closed when tb ends; it
// fails tb when it cannot.
func ListenUnix(tb testing.TB, path string) net.Listener {
	tb.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// WriteFiles writes each of files (name → content) into dir with mode 0600,
// as a secrets directory holds them; it fails tb on an error.
func WriteFiles(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}
