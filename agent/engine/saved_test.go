package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/libvirtx/libvirtxtest"
)

// withDrive is fakeDomainXML with a payload drive holding img.
func withDrive(t *testing.T, name, img string) string {
	t.Helper()
	ed, err := domxml.NewEdit(fakeDomainXML(name, false))
	if err == nil {
		_, _, err = ed.SetPayloadDrive(img, domxml.BusAuto)
	}
	x := ""
	if err == nil {
		x, err = ed.XML()
	}
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestCollectOrphansSavedAndLive: an image named only by a shut-off
// domain's managed save image (its next start resumes with it) or only by a
// running domain's live definition (resumed from such a save after a job
// changed the persistent one) is kept; a domain whose managed save cannot be
// read keeps every image named by its UUID; the rest is collected.
func TestCollectOrphansSavedAndLive(t *testing.T) {
	ctx := context.Background()
	f := libvirtxtest.New()
	defer f.Close()
	dir := t.TempDir()
	e := &Engine{Host: f, PayloadDir: dir, ImageMode: 0o640, ImageGID: -1, Log: quietLog()}
	img := func(uuid, hash string) string { return filepath.Join(dir, uuid+"-"+hash+".iso") }

	saved, err := f.DefineXML(ctx, fakeDomainXML("saved", false))
	must(t, err)
	_, err = f.DefineXML(ctx, withDrive(t, "saved", img(saved.UUID, "new")))
	must(t, err)
	f.SetSavedXML(saved.UUID, withDrive(t, "saved", img(saved.UUID, "old")))

	running, err := f.DefineXML(ctx, fakeDomainXML("running", false))
	must(t, err)
	_, err = f.DefineXML(ctx, withDrive(t, "running", img(running.UUID, "new")))
	must(t, err)
	must(t, f.Start(ctx, running.UUID))
	f.SetLiveXML(running.UUID, withDrive(t, "running", img(running.UUID, "old")))

	unread, err := f.DefineXML(ctx, fakeDomainXML("unread", false))
	must(t, err)

	keep := []string{img(saved.UUID, "new"), img(saved.UUID, "old"), img(running.UUID, "new"), img(running.UUID, "old"), img(unread.UUID, "any")}
	orphans := []string{img(saved.UUID, "stale"), img(running.UUID, "stale"), img("00000000-0000-4000-8000-00000000ffff", "gone")}
	past := time.Now().Add(-time.Minute)
	for _, p := range append(append([]string{}, keep...), orphans...) {
		must(t, os.WriteFile(p, []byte("x"), 0o640))
		must(t, os.Chtimes(p, past, past))
	}
	// ListDomains lists in definition order and the running domain's live
	// XML is read instead: the second SavedXML call is the unreadable
	// domain's.
	f.FailNext("SavedXML", nil, errors.New("this function is not supported by the connection driver"))
	defs, err := e.ListDefined(ctx)
	must(t, err)
	n, err := e.CollectOrphans(ctx, defs)
	if err != nil || n != len(orphans) {
		t.Errorf("CollectOrphans removed %d (%v), want %d", n, err, len(orphans))
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was collected: %v", filepath.Base(p), err)
		}
	}
	for _, p := range orphans {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("orphan %s was kept", filepath.Base(p))
		}
	}
}

// TestSupersededKeptForManagedSave: a job that replaces the payload of a
// shut-off domain with a managed save keeps the old image when the save
// names it (the start resumes with it), and removes it otherwise.
func TestSupersededKeptForManagedSave(t *testing.T) {
	for _, withSave := range []bool{true, false} {
		t.Run(fmt.Sprintf("managed_save=%v", withSave), func(t *testing.T) {
			f, d, e := fakeJobEngine(t, fakeDomainXML("ms", false))
			first := runDone(t, e, `{"version":1,"domain":"ms","action":"attach","hostname":"one"}`)
			if withSave {
				f.SetSavedXML(d.UUID, f.XML(d.UUID))
			}
			second := runDone(t, e, `{"version":1,"domain":"ms","action":"attach","hostname":"two"}`)
			if second.Payload.Path == first.Payload.Path {
				t.Fatal("the second job reused the first image")
			}
			_, err := os.Stat(first.Payload.Path)
			if kept := err == nil; kept != withSave {
				t.Errorf("first image kept=%v, want %v", kept, withSave)
			}
		})
	}
}
