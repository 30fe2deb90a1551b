package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/libvirtx/libvirtxtest"
	"github.com/vmpayload/vmpayload/payload/owner"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

// TestMigratedImageOwnership: a domain built on host A migrates to host B,
// with the payload directory local to each host or shared between them
// (two engines on one directory). B's libvirt hook rebuilds or finds the
// image and claims it, as cmd/vmpayload's hook does (the real hook and two
// real libvirtd run in test/migrate). Then A's agent reacts the ways it can:
// the domain's images removed (undefined, or migrated away with
// --undefinesource) and its start-up orphan collection. A may remove its own
// copy in a local directory but never the image B's domain names; B adopts
// the domain (its start-up keeps the image) and B's next job changes the
// medium, removing the superseded image that B owns. Without host ids
// (before owner markers) A removes the shared image: the bug of issue 36.
func TestMigratedImageOwnership(t *testing.T) {
	cases := []struct {
		name   string
		shared bool
		noIDs  bool // engines without a host id: no markers
		// undefineSource: A's definition is gone (--undefinesource);
		// otherwise it stays, shut off, and is undefined later.
		undefineSource bool
		// want
		destKept, sourceCopyKept bool
	}{
		{name: "local, undefinesource", undefineSource: true, destKept: true, sourceCopyKept: false},
		{name: "local, definition left on A", destKept: true, sourceCopyKept: false},
		{name: "shared, undefinesource", shared: true, undefineSource: true, destKept: true},
		{name: "shared, definition left on A", shared: true, destKept: true},
		{name: "shared, no host ids (issue 36's bug)", shared: true, noIDs: true, undefineSource: true, destKept: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			log := quietLog()
			dirA := filepath.Join(t.TempDir(), "payload")
			dirB := dirA
			if !tc.shared {
				dirB = filepath.Join(t.TempDir(), "payload")
			}
			idA, idB := "host-a", "host-b"
			if tc.noIDs {
				idA, idB = "", ""
			}
			fA, fB := libvirtxtest.New(), libvirtxtest.New()
			eA := &Engine{Host: fA, PayloadDir: dirA, ImageMode: 0o640, ImageGID: -1, Log: log, HostID: idA, Cleanups: &Cleanups{}}
			eB := &Engine{Host: fB, PayloadDir: dirB, ImageMode: 0o640, ImageGID: -1, Log: log, HostID: idB, Cleanups: &Cleanups{}}
			dom, err := fA.DefineXML(ctx, fakeDomainXML("vmpx-mig", true))
			must(t, err)
			r := runJob(t, eA, "vmpx-mig", "one", "start")
			if r.Error != nil {
				t.Fatalf("job on A: %+v", r.Error)
			}
			img := r.Payload.Path
			if by, _ := owner.Of(img); by != idA {
				t.Fatalf("owner of the image A built = %q, want %q", by, idA)
			}

			// The migration: B's hook makes sure of the image from the
			// recipe in the migrated XML and claims it; B runs the domain.
			xml := fA.XML(dom.UUID)
			rc, ok, err := recipe.FromDomainXML(xml)
			if err != nil || !ok {
				t.Fatalf("recipe in A's definition: %v, %v", ok, err)
			}
			imgB := filepath.Join(dirB, filepath.Base(img))
			rcB := *rc
			rcB.Path = imgB // the same path on a real host; here the directories differ when local
			out, err := recipe.Rebuild(ctx, &rcB, recipe.RebuildOptions{PayloadDir: dirB, Mode: 0o640, GID: -1, Keys: noSecretsDirKeys, DomainUUID: dom.UUID})
			must(t, err)
			if want := map[bool]recipe.Outcome{true: recipe.OutcomeIntact, false: recipe.OutcomeRebuilt}[tc.shared]; out != want {
				t.Errorf("B's hook: %s, want %s", out, want)
			}
			must(t, owner.Claim(imgB, idB))
			if !tc.shared {
				// B's definition names B's path (equal on real hosts).
				xml = strings.ReplaceAll(xml, dirA, dirB)
			}
			domB, err := fB.DefineXML(ctx, xml)
			must(t, err)
			fB.SetActive(domB.UUID, true)
			if tc.undefineSource {
				fA.Remove(dom.UUID)
			} else {
				fA.SetActive(dom.UUID, false)
			}
			// Every image predates the listings below.
			past := time.Now().Add(-time.Minute)
			for _, p := range []string{img, imgB} {
				must(t, os.Chtimes(p, past, past))
			}

			// A's clean-ups.
			if tc.undefineSource {
				eA.RemoveDomainImages(dom.UUID) // migrated away and gone
			}
			collect(t, eA)
			if !tc.undefineSource {
				fA.Remove(dom.UUID) // undefined later (the agent's undefined event)
				eA.RemoveDomainImages(dom.UUID)
			}
			if got := exists(imgB); got != tc.destKept {
				t.Fatalf("image B's domain names present=%v after A's clean-ups, want %v", got, tc.destKept)
			}
			if !tc.shared {
				if got := exists(img); got != tc.sourceCopyKept {
					t.Errorf("A's own copy present=%v, want %v", got, tc.sourceCopyKept)
				}
				if _, err := os.Stat(owner.Path(img)); !os.IsNotExist(err) {
					t.Errorf("A's marker of its removed copy: %v, want it gone", err)
				}
			}
			if !tc.destKept {
				return
			}

			// B adopts the domain: its start-up keeps the image, claimed.
			collect(t, eB)
			if !exists(imgB) {
				t.Fatal("B's start-up removed the image of its own domain")
			}
			if by, _ := owner.Of(imgB); by != idB {
				t.Errorf("owner after B's start-up = %q, want %q", by, idB)
			}
			// A later job on B changes the running domain's medium; the
			// superseded image is B's, and B removes it.
			r2 := runJob(t, eB, "vmpx-mig", "two", "")
			if r2.Error != nil {
				t.Fatalf("job on B: %+v", r2.Error)
			}
			if r2.Payload.Path == imgB || !exists(r2.Payload.Path) {
				t.Fatalf("job on B: image %s (old %s)", r2.Payload.Path, imgB)
			}
			if exists(imgB) {
				t.Error("B kept the image its job superseded")
			}
			if by, _ := owner.Of(r2.Payload.Path); by != idB {
				t.Errorf("owner of B's new image = %q, want %q", by, idB)
			}
			// A's next start-up leaves B's new image alone too.
			collect(t, eA)
			if !exists(r2.Payload.Path) {
				t.Error("A's start-up removed B's new image")
			}
		})
	}
}

// collect runs e's start-up work (rebuild, then orphan collection) on one
// listing, a moment after every file's time.
func collect(t *testing.T, e *Engine) {
	t.Helper()
	time.Sleep(10 * time.Millisecond)
	defs, err := e.ListDefined(context.Background())
	must(t, err)
	if _, err := e.RebuildImages(context.Background(), defs); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CollectOrphans(context.Background(), defs); err != nil {
		t.Fatal(err)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
