package agent_test

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestAgentLibvirtdStopped stops libvirtd (SIGSTOP, by its pid) so that it
// accepts nothing and answers nothing, like a daemon wedged on hung storage:
// a job then fails once with libvirt_timeout naming the call after
// libvirt_timeout, /metrics counts it, and after SIGCONT the agent has
// reconnected and the next job is done. libvirtd is shared with other
// tests, so this runs only with VMPAYLOAD_LIBVIRTD_RESTART=1
// (test/hosts.sh sandbox -test.run TestAgentLibvirtdStopped runs it
// against a private libvirtd).
func TestAgentLibvirtdStopped(t *testing.T) {
	testenv.NeedLibvirtdRestart(t, "stops")
	a := newAgent(t, systemURI, "--libvirt-timeout", "3s")
	a.start()
	name := domainName(t, "stopped")
	defineDomain(t, a.Dir, name, "pc", "")

	pid := agenttest.LibvirtdPID(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume) // never leave it stopped

	t0 := time.Now()
	j := job(name, "stopped-1", "attach")
	r := a.run("stopped-1", j)
	took := time.Since(t0)
	if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeLibvirtTimeout ||
		!strings.Contains(r.Error.Message, "looking up domain "+name) {
		t.Fatalf("result %s %+v; want failed with libvirt_timeout naming the lookup", r.State, r.Error)
	}
	if took > 30*time.Second {
		t.Errorf("the job took %s with libvirt_timeout 3s", took)
	}
	if n := a.metric(`vmpayload_libvirt_timeouts_total{call="domain"}`); n != 1 {
		t.Errorf("vmpayload_libvirt_timeouts_total{call=\"domain\"} = %v; want 1", n)
	}
	if _, err := os.Stat(a.SpoolDir + "/done/stopped-1.json"); err == nil {
		t.Error("the timed-out job also has a done result")
	}
	t.Logf("job failed after %s with: %s", took.Round(time.Millisecond), r.Error.Message)

	resume()
	waitFor(t, "the reconnection", func() bool { return a.metric("vmpayload_libvirt_reconnects_total") >= 1 })
	r2 := a.run("stopped-2", job(name, "stopped-2", "attach"))
	mustDone(t, r2)
}
