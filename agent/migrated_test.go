package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/libvirtxtest"
	"github.com/vmpayload/vmpayload/payload/owner"
)

// TestMigratedAwayImages: the agent's reaction to libvirt's "stopped,
// migrated" event (a live migration away; with --undefinesource libvirt
// then drops the definition without an undefined event) and to "undefined".
// An image another host claimed (a shared payload directory: the
// destination's hook did) is never removed; one this host owns is removed
// once the domain's definition is gone, and kept while it stays.
func TestMigratedAwayImages(t *testing.T) {
	cases := []struct {
		name      string
		owner     string // marker of the image ("" none)
		undefined bool   // the definition is gone (--undefinesource)
		event     libvirtx.Event
		wantKept  bool
		// later: the definition goes only after the event (libvirt removes
		// it just after); the next rescan removes the image
		later bool
	}{
		{"migrated, undefinesource, destination owns it", "host-b", true, libvirtx.Event{Type: libvirtx.EventStopped, Detail: libvirtx.StoppedMigrated}, true, false},
		{"migrated, undefinesource, this host owns it", "host-a", true, libvirtx.Event{Type: libvirtx.EventStopped, Detail: libvirtx.StoppedMigrated}, false, false},
		{"migrated, undefinesource, no marker", "", true, libvirtx.Event{Type: libvirtx.EventStopped, Detail: libvirtx.StoppedMigrated}, false, false},
		{"migrated, definition stays", "host-a", false, libvirtx.Event{Type: libvirtx.EventStopped, Detail: libvirtx.StoppedMigrated}, true, false},
		{"migrated, definition gone after the event", "host-a", false, libvirtx.Event{Type: libvirtx.EventStopped, Detail: libvirtx.StoppedMigrated}, false, true},
		{"migrated, definition gone after the event, destination owns it", "host-b", false, libvirtx.Event{Type: libvirtx.EventStopped, Detail: libvirtx.StoppedMigrated}, true, true},
		{"stopped otherwise, definition gone", "host-a", true, libvirtx.Event{Type: libvirtx.EventStopped}, true, false},
		{"undefined, destination owns it", "host-b", true, libvirtx.Event{Type: libvirtx.EventUndefined}, true, false},
		{"undefined, this host owns it", "host-a", true, libvirtx.Event{Type: libvirtx.EventUndefined}, false, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			payload := filepath.Join(dir, "payload")
			log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
			f := libvirtxtest.New()
			d, err := f.DefineXML(context.Background(), domainXML(fmt.Sprintf("mig-%d", i), "pc", ""))
			if err != nil {
				t.Fatal(err)
			}
			a, err := agent.New(agent.Options{Host: f, SpoolDir: filepath.Join(dir, "spool"), PayloadDir: payload,
				SecretsDir: filepath.Join(dir, "secrets"), Workers: 1, RescanInterval: 50 * time.Millisecond, ImageGID: -1, Log: log, HostID: "host-a"})
			if err != nil {
				t.Fatal(err)
			}
			cancel, done := runAgent(t, a)
			defer func() { cancel(); <-done }()
			// After the start-up's orphan collection: the image of the
			// running domain, as its job left it.
			img := filepath.Join(payload, d.UUID+"-0123456789abcdef.iso")
			if err := os.WriteFile(img, []byte("image"), 0o640); err != nil {
				t.Fatal(err)
			}
			if err := owner.Claim(img, tc.owner); err != nil {
				t.Fatal(err)
			}
			if tc.undefined {
				f.Remove(d.UUID)
			}
			if tc.later {
				// The lookup at the event still finds the definition; the
				// next one (the rescan's) does not.
				var lookups atomic.Int32
				f.OnCall = func(c libvirtxtest.Call) error {
					if c.Method == "Domain" && c.Arg == d.UUID && lookups.Add(1) == 2 {
						f.Remove(d.UUID)
					}
					return nil
				}
				defer func() {
					for deadline := time.Now().Add(10 * time.Second); lookups.Load() < 2 && time.Now().Before(deadline); {
						time.Sleep(10 * time.Millisecond)
					}
					if lookups.Load() < 2 {
						t.Fatal("no second lookup of the domain at a rescan")
					}
					if !tc.wantKept {
						for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
							if _, err := os.Stat(img); err != nil {
								break
							}
						}
					}
					time.Sleep(200 * time.Millisecond) // rescans more: a kept image stays kept
					if _, err := os.Stat(img); (err == nil) != tc.wantKept {
						t.Errorf("after the rescan: image present=%v, want %v", err == nil, tc.wantKept)
					}
				}()
			}
			evs, stop := a.Subscribe()
			defer stop()
			ev := tc.event
			ev.Name, ev.UUID = d.Name, d.UUID
			if !f.Emit(ev) {
				t.Fatal("event not queued")
			}
			// The agent publishes a domain event after acting on it.
			for e := range evs {
				if e.Kind == "domain" && e.UUID == d.UUID {
					break
				}
			}
			if _, err := os.Stat(img); (err == nil) != (tc.wantKept || tc.later) {
				t.Errorf("image present=%v, want %v", err == nil, tc.wantKept || tc.later)
			}
			if !tc.wantKept && !tc.later {
				if _, err := os.Stat(owner.Path(img)); !os.IsNotExist(err) {
					t.Errorf("marker of the removed image: %v", err)
				}
			}
		})
	}
}
