package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	}{
		{"migrated, undefinesource, destination owns it", "host-b", true, libvirtx.Event{Type: libvirtx.EventStopped, Detail: libvirtx.StoppedMigrated}, true},
		{"migrated, undefinesource, this host owns it", "host-a", true, libvirtx.Event{Type: libvirtx.EventStopped, Detail: libvirtx.StoppedMigrated}, false},
		{"migrated, undefinesource, no marker", "", true, libvirtx.Event{Type: libvirtx.EventStopped, Detail: libvirtx.StoppedMigrated}, false},
		{"migrated, definition stays", "host-a", false, libvirtx.Event{Type: libvirtx.EventStopped, Detail: libvirtx.StoppedMigrated}, true},
		{"stopped otherwise, definition gone", "host-a", true, libvirtx.Event{Type: libvirtx.EventStopped}, true},
		{"undefined, destination owns it", "host-b", true, libvirtx.Event{Type: libvirtx.EventUndefined}, true},
		{"undefined, this host owns it", "host-a", true, libvirtx.Event{Type: libvirtx.EventUndefined}, false},
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
				SecretsDir: filepath.Join(dir, "secrets"), Workers: 1, RescanInterval: time.Hour, ImageGID: -1, Log: log, HostID: "host-a"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			ready := make(chan struct{})
			go func() { done <- a.Run(ctx, func() { close(ready) }) }()
			defer func() { cancel(); <-done }()
			<-ready
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
			if _, err := os.Stat(img); (err == nil) != tc.wantKept {
				t.Errorf("image present=%v, want %v", err == nil, tc.wantKept)
			}
			if !tc.wantKept {
				if _, err := os.Stat(owner.Path(img)); !os.IsNotExist(err) {
					t.Errorf("marker of the removed image: %v", err)
				}
			}
		})
	}
}
