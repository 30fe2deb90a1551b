package agent_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
)

// heldAfterLookup returns domain lookups only when the test lets it, after
// they were made, so that a test can change the domain under a running job.
// Only the first lookup of gone-d is held, and it is held until the test
// has taken it (not only when the test happens to be waiting already: the
// job's lookup could otherwise slip past and a later one be held instead).
type heldAfterLookup struct {
	*libvirtx.LibvirtHost
	looked  chan libvirtx.DomainInfo
	release chan struct{}
	once    sync.Once
}

func (h *heldAfterLookup) Domain(ctx context.Context, name string) (libvirtx.DomainInfo, error) {
	d, err := h.LibvirtHost.Domain(ctx, name)
	if err == nil && name == "gone-d" {
		h.once.Do(func() {
			h.looked <- d
			<-h.release
		})
	}
	return d, err
}

// TestDomainGoneDuringJob undefines or destroys a domain between the job's
// lookup and its attach. The job gets exactly one result, done: an
// undefined domain is defined again by the attach from the definition the
// job read, and a destroyed one is handled as stopped (the job is redone for
// its new state instead of failing domain_running). No image of a failed
// job is left, and the agent stays healthy.
func TestDomainGoneDuringJob(t *testing.T) {
	tests := []struct {
		name   string
		start  bool // the domain runs when the job looks it up (a start job)
		change func(h *libvirtx.LibvirtHost, uuid string) error
	}{
		{"undefined", false, func(h *libvirtx.LibvirtHost, uuid string) error { return h.Undefine(context.Background(), uuid) }},
		{"destroyed", true, func(h *libvirtx.LibvirtHost, uuid string) error { return h.Destroy(context.Background(), uuid) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			payload := filepath.Join(dir, "payload")
			log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
			host, err := libvirtx.OpenHost("test://"+nodeFile(t, dir, payload), libvirtx.HostOptions{Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			defer host.Close()
			dom, err := host.DefineXML(context.Background(), domainXML("gone-d", "pc", ""))
			if err != nil {
				t.Fatal(err)
			}
			if tt.start {
				if err := host.Start(context.Background(), dom.UUID); err != nil {
					t.Fatal(err)
				}
			}
			held := &heldAfterLookup{LibvirtHost: host, looked: make(chan libvirtx.DomainInfo), release: make(chan struct{})}
			a, err := agent.New(agent.Options{Host: held, SpoolDir: filepath.Join(dir, "spool"), PayloadDir: payload,
				SecretsDir: filepath.Join(dir, "secrets"), Workers: 1, RescanInterval: 100 * time.Millisecond, ImageGID: -1, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			cancel, done := runAgent(t, a)
			defer func() { cancel(); <-done }()
			h := &harness{t: t, dir: dir, host: host, agent: a, spool: a.Spool(), payload: payload}
			action := "attach"
			if tt.start {
				action = "start"
			}
			h.drop("gone", map[string]any{"version": 1, "id": "gone", "domain": "gone-d", "action": action})
			d := <-held.looked
			err = tt.change(host, d.UUID)
			close(held.release)
			if err != nil {
				t.Fatal(err)
			}
			r := h.result("gone")
			t.Logf("result: %s %+v", r.State, r.Error)
			if n := len(resultFiles(t, h, "gone")); n != 1 {
				t.Errorf("%d result files, want 1", n)
			}
			if r.State != result.StateDone {
				// undefined: the attach defines the domain again from the
				// definition the job read; destroyed: the job is redone
				// for the stopped domain.
				t.Errorf("state %s %+v, want done", r.State, r.Error)
			}
			if r.Error != nil {
				ents, _ := os.ReadDir(payload)
				for _, e := range ents {
					t.Errorf("image of a failed job left behind: %s", e.Name())
				}
			}
			if hs := a.Health(); hs["status"] != "ok" {
				t.Errorf("health %v", hs)
			}
		})
	}
}

func resultFiles(t *testing.T, h *harness, id string) []string {
	var out []string
	for _, sub := range []string{"done", "failed"} {
		p := filepath.Join(h.spool.Root, sub, id+".json")
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}
