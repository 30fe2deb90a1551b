package main

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/cmd/internal/cli"
	"github.com/vmpayload/vmpayload/test/agenttest"
)

// TestOldCommandLines: the command lines of earlier releases, which the
// standard flag package parsed (single-dash long flags, -o=, --o, flags after
// the arguments), give the same exit status and output as pflag's spelling.
func TestOldCommandLines(t *testing.T) {
	dir := t.TempDir()
	job := "../../configs/examples/11-secrets.json"
	iso := filepath.Join(dir, "seed.iso")
	payloadDir := filepath.Join(dir, "payload")
	domXML := filepath.Join(dir, "dom.xml")
	must(t, os.WriteFile(domXML, []byte("<domain type='qemu'><name>old</name><uuid>0b3f1c44-1d2e-4f5a-8b6c-7d8e9fa0b1c2</uuid>"+
		"<memory unit='MiB'>48</memory><os><type arch='x86_64' machine='pc'>hvm</type></os><devices/></domain>"), 0o644))
	secrets := "../../configs/examples/secrets"
	for _, c := range []struct{ old, now []string }{
		{[]string{"build", "-secrets-dir", secrets, "-o", iso, "-json", job}, []string{"build", "--secrets-dir", secrets, "--output", iso, "--json", job}},
		{[]string{"build", job, "-secrets-dir=" + secrets, "-o=" + iso, "-mode", "0600"}, []string{"build", job, "--secrets-dir=" + secrets, "-o", iso, "--mode", "0600"}},
		{[]string{"build", "--o", iso, "--secrets-dir", secrets, job}, []string{"build", "-o", iso, "--secrets-dir", secrets, job}},
		{[]string{"validate", "-json", job}, []string{"validate", "--json", job}},
		{[]string{"validate", "-secrets-dir", secrets, job}, []string{"validate", "--secrets-dir", secrets, job}},
		{[]string{"inspect", "-json", iso}, []string{"inspect", "--json", iso}},
		{[]string{"inspect", "-cat", "meta-data", iso}, []string{"inspect", "--cat", "meta-data", iso}},
		{[]string{"recipe", "-payload-dir", payloadDir, "-secrets-dir", secrets, "-domain-xml", domXML, job},
			[]string{"recipe", "--payload-dir", payloadDir, "--secrets-dir", secrets, "--domain-xml", domXML, job}},
		{[]string{"run", "-print-job", "web1", "-hostname", "web1", "-attach", "-wait=guest", "-ssh-password-auth=false", "-runcmd", "-x"},
			[]string{"run", "--print-job", "web1", "--hostname", "web1", "--attach", "--wait=guest", "--ssh-password-auth=false", "--runcmd", "-x"}},
		{[]string{"run", "web1", "-print-job", "-regenerate-ssh-host-keys", "-power-state", "reboot", "-power-delay", "2"},
			[]string{"run", "web1", "--print-job", "--regenerate-ssh-host-keys", "--power-state", "reboot", "--power-delay", "2"}},
		{[]string{"status", "-socket", filepath.Join(dir, "none.sock"), "-spool-dir", dir, "-json", "nope"},
			[]string{"status", "--socket", filepath.Join(dir, "none.sock"), "--spool-dir", dir, "--json", "nope"}},
		{[]string{"hook", "-config", filepath.Join(dir, "none.yaml"), "old", "stopped", "end", "-"},
			[]string{"hook", "--config", filepath.Join(dir, "none.yaml"), "old", "stopped", "end", "-"}},
	} {
		oc, oout, oerr := runCLI(t, c.old...)
		nc, nout, nerr := runCLI(t, c.now...)
		if oc != nc || oout != nout || oerr != nerr {
			t.Errorf("%q: exit %d, stdout %q, stderr %q\n%q: exit %d, stdout %q, stderr %q", c.old, oc, oout, oerr, c.now, nc, nout, nerr)
		}
		if nc == exitUsage && !strings.HasPrefix(c.now[0], "status") {
			t.Errorf("%q: usage error: %s", c.now, nerr)
		}
	}
}

// TestPureBinary: vmpayload does not reach libvirt.org/go/libvirt, builds
// without cgo and is a static executable; the daemon links the binding.
func TestPureBinary(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	deps := func(env []string, args ...string) []string {
		cmd := exec.Command(gobin, append([]string{"list", "-deps"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %q: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	const binding = "libvirt.org/go/libvirt"
	// with the tag the tests and the daemon use, and cgo on
	if d := deps([]string{"CGO_ENABLED=1"}, "-tags", "libvirt_dlopen", "."); slices.Contains(d, binding) {
		t.Errorf("cmd/vmpayload depends on %s", binding)
	}
	if d := deps(nil, "-tags", "libvirt_dlopen", "../vmpayloadd"); !slices.Contains(d, binding) {
		t.Errorf("cmd/vmpayloadd does not depend on %s: is the check looking at the right name?", binding)
	}
	bin := filepath.Join(t.TempDir(), "vmpayload")
	cmd := exec.Command(gobin, "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("vmpayload built with CGO_ENABLED=0 has a %v program header: not a static executable", p.Type)
		}
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(out), "vmpayload ") {
		t.Errorf("the static binary: %q %v", out, err)
	}
	checkStartupInit(t, bin)
}

// ownInitBudget bounds the heap bytes vmpayload's own packages allocate in
// their init (GODEBUG=inittrace=1): a kind's tables are built on first use,
// not at every start (issue 40; 6 504 bytes, the kind registrations and a
// few small tables, when it was set).
const ownInitBudget = 8 << 10

// checkStartupInit runs "bin version" with GODEBUG=inittrace=1: package
// main has no init, and vmpayload's own packages allocate at most
// ownInitBudget bytes in theirs. Allocation counts do not depend on the
// machine's speed.
func checkStartupInit(t *testing.T, bin string) {
	t.Helper()
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s version with GODEBUG=inittrace=1: %v\n%s", bin, err, stderr.String())
	}
	own, lines := 0, 0
	var ownLines strings.Builder
	for _, l := range strings.Split(stderr.String(), "\n") {
		var pkg string
		var at, clock float64
		var bytes, allocs int
		if _, err := fmt.Sscanf(l, "init %s @%f ms, %f ms clock, %d bytes, %d allocs", &pkg, &at, &clock, &bytes, &allocs); err != nil {
			continue
		}
		lines++
		if pkg == "main" {
			t.Errorf("package main has an init at start-up (%d bytes, %d allocations)", bytes, allocs)
		}
		if strings.HasPrefix(pkg, "github.com/vmpayload/vmpayload/") {
			own += bytes
			ownLines.WriteString(l + "\n")
		}
	}
	if lines == 0 {
		t.Fatalf("no init lines in the trace:\n%s", stderr.String())
	}
	if own > ownInitBudget {
		t.Errorf("vmpayload's own packages allocate %d bytes at init, more than %d: build tables on first use\n%s", own, ownInitBudget, ownLines.String())
	}
}

// TestAgentPassThrough: "vmpayload agent ARGS" runs vmpayloadd (the one
// next to it) with ARGS as given, and its exit status is the daemon's.
func TestAgentPassThrough(t *testing.T) {
	bin := agenttest.BinaryT(t)
	if _, err := os.Stat(filepath.Join(filepath.Dir(bin), cli.DaemonName)); err != nil {
		t.Skipf("no %s next to %s (a prebuilt binary): %v", cli.DaemonName, bin, err)
	}
	for _, args := range [][]string{
		{"agent", "--config", "", "--print-config", "--workers", "7"},
		{"agent", "-config", "", "-print-config", "-workers=7"},
	} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil || !strings.Contains(string(out), "workers: 7\n") || !strings.Contains(string(out), "libvirt_uri: qemu:///system") {
			t.Errorf("%q: %v\n%s", args, err, out)
		}
	}
	out, err := exec.Command(bin, "agent", "--config", "", "--cdrom-bus", "floppy").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(string(out), "floppy") {
		t.Errorf("bad flag value: %v %s", err, out)
	}
	if out, err := exec.Command(bin, "agent", "--help").Output(); err != nil || !strings.Contains(string(out), "Usage:\n  vmpayloadd") {
		t.Errorf("agent --help is not the daemon's: %v\n%s", err, out)
	}

	// the arguments arrive verbatim: a stand-in daemon prints them
	dir := t.TempDir()
	copyFile(t, bin, filepath.Join(dir, "vmpayload"))
	must(t, os.WriteFile(filepath.Join(dir, cli.DaemonName), []byte("#!/bin/sh\nprintf '%s|' \"$0\" \"$@\"\n"), 0o755))
	out, err = exec.Command(filepath.Join(dir, "vmpayload"), "agent", "-config", "x y", "--", "-h").Output()
	if want := filepath.Join(dir, cli.DaemonName) + "|-config|x y|--|-h|"; err != nil || string(out) != want {
		t.Errorf("the daemon got %q (%v), want %q", out, err, want)
	}
}

// TestFindDaemon: next to the running binary first, then the install path,
// then $PATH.
func TestFindDaemon(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "bin", "vmpayload")
	installed := filepath.Join(dir, "sbin", cli.DaemonName)
	inPath := filepath.Join(dir, "path", cli.DaemonName)
	lookPath := func(name string) (string, error) {
		if _, err := os.Stat(inPath); err != nil {
			return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
		}
		return inPath, nil
	}
	for _, d := range []string{"bin", "sbin", "path"} {
		must(t, os.Mkdir(filepath.Join(dir, d), 0o755))
	}
	must(t, os.WriteFile(exe, nil, 0o755))
	if _, err := findDaemon(exe, installed, lookPath); err == nil || !strings.Contains(err.Error(), "not in $PATH") {
		t.Errorf("no daemon anywhere: %v", err)
	}
	steps := []struct{ create, want string }{{inPath, inPath}, {installed, installed}, {filepath.Join(dir, "bin", cli.DaemonName), filepath.Join(dir, "bin", cli.DaemonName)}}
	for _, s := range steps {
		must(t, os.WriteFile(s.create, nil, 0o755))
		if got, err := findDaemon(exe, installed, lookPath); err != nil || got != s.want {
			t.Errorf("with %s: %q %v, want %q", s.create, got, err, s.want)
		}
	}
	// a file that is not executable is passed over
	must(t, os.Chmod(filepath.Join(dir, "bin", cli.DaemonName), 0o644))
	if got, _ := findDaemon(exe, installed, lookPath); got != installed {
		t.Errorf("non-executable next to the binary: got %q", got)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	must(t, err)
	must(t, os.WriteFile(to, b, 0o755))
}

// TestCompletion: cobra's completion protocol (what the bash, zsh and fish
// scripts call) completes subcommands, flags, flag values, the daemon's
// flags after "agent", and domain names from virsh.
func TestCompletion(t *testing.T) {
	complete := func(args ...string) []string {
		t.Helper()
		_, out, _ := runCLI(t, append([]string{"__complete"}, args...)...)
		var words []string
		for _, l := range strings.Split(out, "\n") {
			if l != "" && !strings.HasPrefix(l, ":") {
				words = append(words, strings.SplitN(l, "\t", 2)[0])
			}
		}
		return words
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"bu"}, []string{"build"}},
		{[]string{"build", "--sec"}, []string{"--secrets-dir"}},
		{[]string{"run", "web1", "--form"}, []string{"--format"}},
		{[]string{"run", "web1", "--format", ""}, []string{"nocloud", "configdrive", "ignition"}},
		{[]string{"submit", "--wait="}, []string{"job", "guest"}},
		{[]string{"agent", "--libvirt-u"}, []string{"--libvirt-uri"}},
		{[]string{"dial"}, []string{"dial-stdio"}},
		{[]string{"status", "--conn"}, []string{"--connect"}},
		{[]string{"submit", "--connect", ""}, []string{"ssh://", "unix:///"}},
		{[]string{"run", "web1", "--connect", ""}, []string{"ssh://", "unix:///"}},
	} {
		if got := complete(c.args...); !slices.Equal(got, c.want) {
			t.Errorf("complete %q = %q, want %q", c.args, got, c.want)
		}
	}
	if _, err := exec.LookPath("virsh"); err != nil {
		t.Skip("no virsh")
	}
	t.Setenv("LIBVIRT_DEFAULT_URI", "test:///default") // its one domain is "test"
	if got := complete("run", ""); !slices.Equal(got, []string{"test"}) {
		t.Errorf("run DOMAIN completes to %q, want the test driver's domain", got)
	}
	if got := complete("run", "x"); len(got) != 0 {
		t.Errorf("run x completes to %q", got)
	}
}
