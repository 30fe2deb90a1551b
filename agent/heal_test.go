package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
)

// waitUntil polls cond until it holds; the bound only ends a hung test.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestUnwrittenResultsAreRetried blocks a result directory with a regular
// file: the job's outcome is kept (not reported final), /healthz says
// degraded naming the cause, and once the file is gone the agent recreates
// the directory and writes the result exactly once, without a restart.
func TestUnwrittenResultsAreRetried(t *testing.T) {
	tests := []struct {
		name    string
		blocked string // spool subdirectory replaced by a file
		job     map[string]any
		state   result.State
	}{
		{"done/ blocked", spool.Done, map[string]any{"version": 1, "id": "heal-done", "domain": "heal-d", "domain_xml": domainXML("heal-d", "pc", ""), "action": "attach"}, result.StateDone},
		{"failed/ blocked", spool.Failed, map[string]any{"version": 1, "id": "heal-failed", "domain": "no-such-domain", "action": "attach"}, result.StateFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startAgent(t, "", nil)
			dir := h.spool.Dir(tt.blocked)
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			id := tt.job["id"].(string)
			h.drop(id, tt.job)
			var health map[string]any
			waitUntil(t, "results_pending 1", func() bool {
				health = h.agent.Health()
				return health["results_pending"] == 1
			})
			reasons, _ := health["reasons"].([]string)
			if health["status"] != "degraded" || !strings.Contains(strings.Join(reasons, "\n"), "not a directory") {
				t.Errorf("health while the result cannot be written: %v, want degraded naming the cause", health)
			}
			// The spool area may be degraded too (the blocked directory
			// cannot be recreated); results is.
			if got := h.sample(`vmpayload_health_degraded{area="results"}`); got != "1" {
				t.Errorf(`vmpayload_health_degraded{area="results"} %s while a result waits, want 1`, got)
			}
			if r, _ := h.agent.Job(id); r.State.Final() {
				t.Errorf("job reported %s before its result was written", r.State)
			}
			if _, err := os.Lstat(filepath.Join(h.spool.Dir(spool.Processing), id+".json")); err != nil {
				t.Errorf("the job left processing/ before its result was written: %v", err)
			}
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			r := h.result(id)
			if r.State != tt.state {
				t.Errorf("state %s (%+v), want %s", r.State, r.Error, tt.state)
			}
			waitUntil(t, "healthy again", func() bool { return h.agent.Health()["status"] == "ok" })
			for area, v := range h.degradedSeries() {
				if v != "0" {
					t.Errorf("healthy again, but vmpayload_health_degraded{area=%q} %s", area, v)
				}
			}
			if got, _ := h.agent.Job(id); got.State != tt.state {
				t.Errorf("API state %s, want %s", got.State, tt.state)
			}
		})
	}
}

// TestFailedImageRemovalIsRetried: a superseded image that cannot be
// removed (here a non-empty directory in its place, which even root cannot
// unlink) stays pending: /healthz is degraded naming it, the removal is
// retried at each rescan and succeeds once the cause is gone, without a
// restart.
func TestFailedImageRemovalIsRetried(t *testing.T) {
	h := startAgent(t, "", nil)
	job := func(id, host string) map[string]any {
		return map[string]any{"version": 1, "id": id, "domain": "clean-d", "domain_xml": domainXML("clean-d", "pc", ""), "action": "attach", "hostname": host}
	}
	h.drop("clean-1", job("clean-1", "one"))
	r1 := h.result("clean-1")
	if r1.State != result.StateDone {
		t.Fatalf("first job: %s %+v", r1.State, r1.Error)
	}
	old := r1.Payload.Path
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(old, "busy"), 0o700); err != nil {
		t.Fatal(err)
	}
	h.drop("clean-2", job("clean-2", "two"))
	if r2 := h.result("clean-2"); r2.State != result.StateDone {
		t.Fatalf("second job: %s %+v", r2.State, r2.Error)
	}
	var health map[string]any
	waitUntil(t, "degraded by the pending removal", func() bool {
		health = h.agent.Health()
		reasons, _ := health["reasons"].([]string)
		return strings.Contains(strings.Join(reasons, "\n"), "could not be removed")
	})
	if health["status"] != "degraded" {
		t.Errorf("health %v, want degraded", health)
	}
	if got := h.degradedSeries(); got[metrics.AreaCleanup] != "1" || got[metrics.AreaResults] != "0" || got[metrics.AreaSpool] != "0" || got[metrics.AreaPayloadDir] != "0" {
		t.Errorf("vmpayload_health_degraded while the removal is pending: %v, want only cleanup 1", got)
	}
	if err := os.Remove(filepath.Join(old, "busy")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "healthy again", func() bool { return h.agent.Health()["status"] == "ok" })
	for area, v := range h.degradedSeries() {
		if v != "0" {
			t.Errorf("healthy again, but vmpayload_health_degraded{area=%q} %s", area, v)
		}
	}
	if _, err := os.Lstat(old); !os.IsNotExist(err) {
		t.Errorf("superseded image %s still there after the retry: %v", old, err)
	}
}
