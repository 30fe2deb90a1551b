// Package freshhost proves the README's `make demo` on a fresh Debian 12
// root without Go (issue 43): run.sh builds (or takes from its cache) a
// bookworm root with mmdebstrap, copies the working tree in and runs
// `make demo` in a chroot, where test/deps.sh installs Debian's Go from
// bookworm-backports and has it fetch go.mod's toolchain through the module
// proxy. It needs root and the network; it runs with VMPAYLOAD_FRESHHOST=1.
package freshhost

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestFreshDebianHostMakeDemo(t *testing.T) {
	// Not in make test by default: measured 15-25 min on a loaded 2-core
	// machine (docs/install.md), over the 8 min this suite can spare.
	if os.Getenv("VMPAYLOAD_FRESHHOST") != "1" {
		t.Skip("set VMPAYLOAD_FRESHHOST=1: make demo in a fresh Debian 12 root, 15-25 min, root and the network (docs/install.md)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root (mmdebstrap, chroot, unshare)")
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Fatalf("mmdebstrap missing (test/deps.sh installs it): %v", err)
	}
	// a deadline for a stuck run, not a timing assertion
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", "run.sh")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "freshhost:") || strings.HasPrefix(l, "deps:") || strings.HasPrefix(l, "go: downloading go") {
			t.Log(l)
		}
	}
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, strings.Join(lines[max(0, len(lines)-80):], "\n"))
	}
	// the demo ran its job through the socket: submit --wait printed a done result
	for _, want := range []string{"deps: installing golang-go from bookworm-backports", "deps: ok (go version go1.26", `"state": "done"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}
