package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestGuestLoadAfterReady: the guest report follower reads done/ at start-up
// (every result the host ever kept: ~25 µs each) after the agent is ready,
// not before. With that reading held, the agent still becomes ready and
// runs jobs; released, the follower reads every result; and an agent
// stopped while it reads stops at once.
func TestGuestLoadAfterReady(t *testing.T) {
	for _, stopFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("stop while reading=%v", stopFirst), func(t *testing.T) {
			dir := t.TempDir()
			spoolDir := filepath.Join(dir, "spool")
			if err := os.MkdirAll(filepath.Join(spoolDir, "done"), 0o700); err != nil {
				t.Fatal(err)
			}
			const kept = 3
			for i := 0; i < kept; i++ {
				now := time.Now().UTC()
				r := result.Result{ID: fmt.Sprintf("old-%d", i), Domain: "x", DomainUUID: "6f1c1f0e-0000-4000-8000-00000000000" + fmt.Sprint(i),
					Action: "start", State: result.StateDone, FinishedAt: &now}
				b, _ := json.Marshal(r)
				if err := os.WriteFile(filepath.Join(spoolDir, "done", r.ID+".json"), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var logs testenv.LockedBuffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			host, err := libvirtx.OpenHost("test:///default", libvirtx.HostOptions{Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			defer host.Close()
			if _, err := host.DefineXML(context.Background(), domainXML("gl", "pc", "")); err != nil {
				t.Fatal(err)
			}
			a, err := agent.New(agent.Options{Host: host, SpoolDir: spoolDir, PayloadDir: filepath.Join(dir, "payload"),
				SecretsDir: filepath.Join(dir, "secrets"), Workers: 1, RescanInterval: 100 * time.Millisecond, ImageGID: -1, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			agent.HoldGuestLoad(a, release)
			// the agent becomes ready while the follower's reading of done/ is held
			cancel, done := runAgent(t, a)
			defer cancel()
			select {
			case <-agent.GuestLoaded(a):
				t.Fatal("the follower finished reading done/ while it was held")
			default:
			}
			if stopFirst {
				cancel()
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("agent stopped with %v", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("the agent does not stop while the follower's reading is held")
				}
				<-agent.GuestLoaded(a)
				if strings.Contains(logs.String(), "guest report follower resumed") {
					t.Error("a reading cut short by the stop logged that the follower resumed")
				}
				return
			}
			// a job runs meanwhile
			h := &harness{t: t, dir: dir, host: host, agent: a, spool: a.Spool(), payload: filepath.Join(dir, "payload")}
			h.drop("during", map[string]any{"version": 1, "id": "during", "domain": "gl", "action": "attach"})
			if r := h.result("during"); r.State != result.StateDone {
				t.Fatalf("job during the reading: %s %+v", r.State, r.Error)
			}
			close(release)
			select {
			case <-agent.GuestLoaded(a):
			case <-time.After(30 * time.Second):
				t.Fatal("the follower did not finish reading done/")
			}
			// the kept results and the one just written
			if want := fmt.Sprintf("results_read=%d", kept+1); !strings.Contains(logs.String(), want) {
				t.Errorf("log does not say %s:\n%s", want, logs.String())
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("agent stopped with %v", err)
			}
		})
	}
}
