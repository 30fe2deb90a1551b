// Package hosts is the Go side of test/hosts.sh: it starts a set of private
// libvirtd "hosts" on this machine (each in its own mount namespace, with the
// packaged hook and its own agent), hands out each host's URI, directories
// and agent, runs the script's other commands on the set (agent restarts,
// payload layout) and stops the set when the test ends. Hosts that move
// domains between them share the recipe key (docs/security.md, "Recipe
// key"): Start copies host 1's to the others. Only tests import it; they run
// as root.
package hosts

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// Options describe a set.
type Options struct {
	N       int               // hosts; 2 when zero
	Prefix  string            // of the set's directory under /var/tmp
	Secrets map[string]string // files written into every host's secrets directory
}

// Set is a running test/hosts.sh set.
type Set struct {
	t      testing.TB
	script string
	binDir string
	Dir    string            // DIR of the script
	Env    map[string]string // the KEY=VALUE lines start printed
	hosts  []*Host
}

// Host is one host of a set as a test sees it.
type Host struct {
	N         int
	URI       string // its libvirtd, from outside its namespace
	Dir       string // DIR/hI
	AgentSock string
	MachineID string
	Agent     *agenttest.Agent // a handle on the script's agent: spool, socket, log
}

// Script is the path of test/hosts.sh.
func Script() string {
	return testenv.RepoPath("test", "hosts.sh")
}

// Start starts o.N hosts in layout local with their agents; tb's clean-up
// stops them and removes the set's directory unless tb failed or
// VMPAYLOAD_E2E_KEEP is set (then it logs where it is and the agents' log
// tails).
func Start(tb testing.TB, o Options) *Set {
	tb.Helper()
	if o.N == 0 {
		o.N = 2
	}
	if o.Prefix == "" {
		o.Prefix = "vmpx-hosts-"
	}
	bin := agenttest.BinaryT(tb)
	dir, err := os.MkdirTemp("/var/tmp", o.Prefix)
	if err != nil {
		tb.Fatal(err)
	}
	s := &Set{t: tb, script: Script(), binDir: filepath.Dir(bin), Dir: dir, Env: map[string]string{}}
	tb.Cleanup(func() {
		s.Run("stop", dir)
		if !tb.Failed() && os.Getenv("VMPAYLOAD_E2E_KEEP") == "" {
			os.RemoveAll(dir)
			return
		}
		for _, h := range s.hosts {
			tb.Logf("host %d agent log, tail:\n%s", h.N, h.Agent.Tail(40))
		}
		tb.Logf("kept %s", dir)
	})
	out := s.Run("start", "-n", strconv.Itoa(o.N), dir)
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			s.Env[k] = v
		}
	}
	for i := 1; i <= o.N; i++ {
		p := fmt.Sprintf("HOST%d_", i)
		h := &Host{N: i, URI: s.Env[p+"URI"], Dir: s.Env[p+"DIR"], AgentSock: s.Env[p+"AGENT_SOCK"], MachineID: s.Env[p+"MACHINE_ID"]}
		if h.URI == "" || h.MachineID == "" {
			tb.Fatalf("hosts.sh start printed no %sURI/MACHINE_ID:\n%s", p, out)
		}
		if h.Agent, err = agenttest.New(agenttest.Options{Bin: bin, Dir: h.Dir}); err != nil {
			tb.Fatal(err)
		}
		s.hosts = append(s.hosts, h)
	}
	s.shareRecipeKey(o.Secrets)
	return s
}

// shareRecipeKey gives every host host 1's recipe key and the secrets.
func (s *Set) shareRecipeKey(secrets map[string]string) {
	var key []byte
	for _, h := range s.hosts {
		sd := filepath.Join(h.Dir, "secrets")
		for name, v := range secrets {
			if err := os.WriteFile(filepath.Join(sd, name), []byte(v), 0o600); err != nil {
				s.t.Fatal(err)
			}
		}
		var err error
		if key == nil {
			if _, err = seal.LoadOrCreate(recipe.KeyFile(sd)); err == nil {
				key, err = os.ReadFile(recipe.KeyFile(sd))
			}
		} else {
			err = os.WriteFile(recipe.KeyFile(sd), key, 0o600)
		}
		if err != nil {
			s.t.Fatal(err)
		}
	}
}

// Run runs test/hosts.sh with args and returns its stdout; a failure
// fails the test.
func (s *Set) Run(args ...string) string {
	s.t.Helper()
	cmd := exec.Command("/bin/bash", append([]string{s.script}, args...)...)
	cmd.Env = append(os.Environ(), "VMPAYLOAD_BIN_DIR="+s.binDir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("hosts.sh %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	s.t.Logf("TIMING hosts.sh %s: %.1fs", strings.Join(args, " "), time.Since(t0).Seconds())
	return out.String()
}

// Host returns host i (1..N).
func (s *Set) Host(i int) *Host { return s.hosts[i-1] }

// AgentCtl starts, stops or restarts host i's agent.
func (s *Set) AgentCtl(what string, i int) { s.Run("agent", what, strconv.Itoa(i), s.Dir) }

// Layout switches the set's payload directory to layout "local" or
// "shared"; restart the agents afterwards.
func (s *Set) Layout(layout string) { s.Run("layout", layout, s.Dir) }

// Storage is where host i keeps the file at payload path p in layout: its
// own payload storage, or the shared one, as seen from outside.
func (s *Set) Storage(i int, p, layout string) string {
	if layout == "shared" {
		return filepath.Join(s.Dir, "shared", filepath.Base(p))
	}
	return filepath.Join(s.Host(i).Dir, "payload", filepath.Base(p))
}

// Virsh runs virsh on h's libvirtd (testenv.Virsh) and fails tb on an
// error; it returns stdout trimmed.
func (h *Host) Virsh(tb testing.TB, args ...string) string {
	tb.Helper()
	return testenv.VirshT(tb, h.URI, args...)
}

// VirshTry runs virsh on h's libvirtd and returns stdout and stderr
// together: what a refused operation said.
func (h *Host) VirshTry(args ...string) (string, error) { return testenv.VirshTry(h.URI, args...) }

// VirshCtx is testenv.Virsh on h's libvirtd.
func (h *Host) VirshCtx(ctx context.Context, args ...string) (string, error) {
	return testenv.Virsh(ctx, h.URI, args...)
}
