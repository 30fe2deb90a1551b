package recipe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
)

// ISO layouts in recipes (issue 35). A new ISO image has the Joliet tree
// (image.ISOLayoutJolietTree) and its recipe says so (iso-layout="2"); a
// recipe without the attribute, as every recipe before issue 35, rebuilds
// in image.ISOLayoutGoDiskfs (TestRebuildReleaseRecipes rebuilds the
// released ones byte for byte). The layout is not part of the content: the
// instance-id and content hash do not depend on it.

func TestRecipeRecordsISOLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		j    *job.Job
		attr string // "" : no iso-layout attribute
	}{
		{"configdrive iso", &job.Job{Version: 1, Domain: "vm1", Hostname: "vm1", Format: job.FormatConfigDrive}, ` iso-layout="2"`},
		{"nocloud iso", &job.Job{Version: 1, Domain: "vm2", Hostname: "vm2"}, ` iso-layout="2"`},
		{"configdrive vfat", &job.Job{Version: 1, Domain: "vm3", Hostname: "vm3", Format: job.FormatConfigDrive, Media: job.MediaVFAT}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r, res := build(t, tc.j, dir, "")
			rc, el := newElement(t, r, res)
			if tc.attr != "" && !strings.Contains(el, tc.attr) || tc.attr == "" && strings.Contains(el, "iso-layout") {
				t.Fatalf("recipe element (want %q): %s", tc.attr, el)
			}
			back := roundTrip(t, el)
			if back.ISOLayout != rc.ISOLayout {
				t.Errorf("ISOLayout %d read back as %d", rc.ISOLayout, back.ISOLayout)
			}
			if tc.j.Media == job.MediaVFAT {
				return
			}
			if info, err := image.Inspect(res.Path); err != nil || !info.Joliet || info.ISOLayout != image.ISOLayoutJolietTree {
				t.Errorf("the image: %+v %v; want a Joliet tree", info, err)
			}

			// the same job in the go-diskfs layout: another image, the same
			// content identity
			old := filepath.Join(t.TempDir(), filepath.Base(res.Path))
			oldRes, err := r.Write(context.Background(), old, payload.Options{GID: -1, NoSync: true, ISOLayout: image.ISOLayoutGoDiskfs})
			must(t, err)
			if oldRes.SHA256 == res.SHA256 || oldRes.InstanceID != res.InstanceID || oldRes.ContentHash != res.ContentHash {
				t.Errorf("go-diskfs layout: sha256 %s instance-id %s content %s; Joliet tree: %s %s %s", oldRes.SHA256, oldRes.InstanceID, oldRes.ContentHash, res.SHA256, res.InstanceID, res.ContentHash)
			}

			// the layout is what the rebuild builds: each recipe rebuilds its
			// own bytes, and one that names the other layout fails safe
			rebuild := func(rc *Recipe, dir string) (Outcome, error) {
				return Rebuild(context.Background(), rc, RebuildOptions{Keys: testKeys, PayloadDir: dir, SecretsDir: t.TempDir(), Mode: 0o640, GID: -1})
			}
			must(t, os.Remove(res.Path))
			if out, err := rebuild(back, dir); err != nil || out != OutcomeRebuilt || fileSHA256(t, res.Path) != res.SHA256 {
				t.Errorf("Rebuild of the new recipe: %q %v", out, err)
			}
			// in clear: a sealed job is bound to the attributes (removing
			// one makes it refuse to open, TestSealedRecipeTampered)
			clearEl, err := rc.render(nil, true)
			must(t, err)
			noAttr, ok, err := FromDomainXML(domainXML(strings.Replace(clearEl, tc.attr, "", 1)))
			if err != nil || !ok || noAttr.ISOLayout != image.ISOLayoutGoDiskfs {
				t.Fatalf("recipe without iso-layout: %+v %v %v", noAttr, ok, err)
			}
			must(t, os.Remove(res.Path))
			if _, err := rebuild(noAttr, dir); !errors.Is(err, ErrContentChanged) {
				t.Errorf("the new image's recipe without iso-layout: %v, want ErrContentChanged", err)
			}
			wantNoImage(t, res.Path)
			// a recipe of the go-diskfs image (as an earlier release wrote it)
			oldRc, oldEl := newElement(t, r, oldRes)
			if oldRc.ISOLayout != image.ISOLayoutGoDiskfs || strings.Contains(oldEl, "iso-layout") {
				t.Errorf("recipe of a go-diskfs image: layout %d, %s", oldRc.ISOLayout, oldEl)
			}
			must(t, os.Remove(old))
			if out, err := rebuild(oldRc, filepath.Dir(old)); err != nil || out != OutcomeRebuilt || fileSHA256(t, old) != oldRes.SHA256 {
				t.Errorf("Rebuild of the go-diskfs recipe: %q %v", out, err)
			}
		})
	}
}

// TestReusedImageKeepsItsLayout: an image an earlier release built (the
// go-diskfs layout) and the agent reuses for the same content is recorded
// with its own layout, so its recipe rebuilds it.
func TestReusedImageKeepsItsLayout(t *testing.T) {
	j := &job.Job{Version: 1, Domain: "vm", Hostname: "vm", Format: job.FormatConfigDrive}
	r, err := payloadtest.Render(j, "", payload.Options{})
	must(t, err)
	dir := t.TempDir()
	p := filepath.Join(dir, r.ImageName("dom"))
	written, err := r.Write(context.Background(), p, payload.Options{GID: -1, NoSync: true, ISOLayout: image.ISOLayoutGoDiskfs})
	must(t, err)
	res, err := r.Reuse(p)
	must(t, err)
	if res.ISOLayout != image.ISOLayoutGoDiskfs || res.SHA256 != written.SHA256 {
		t.Fatalf("Reuse: layout %d sha256 %s; written %s", res.ISOLayout, res.SHA256, written.SHA256)
	}
	rc, el := newElement(t, r, res)
	if strings.Contains(el, "iso-layout") {
		t.Errorf("recipe of the reused go-diskfs image: %s", el)
	}
	must(t, os.Remove(p))
	if out, err := Rebuild(context.Background(), rc, RebuildOptions{Keys: testKeys, PayloadDir: dir, Mode: 0o640, GID: -1}); err != nil || out != OutcomeRebuilt || fileSHA256(t, p) != written.SHA256 {
		t.Errorf("Rebuild: %q %v", out, err)
	}
}

func TestISOLayoutAttributeRejects(t *testing.T) {
	dir := t.TempDir()
	_, res := build(t, &job.Job{Version: 1, Hostname: "h"}, dir, "")
	r, _ := build(t, &job.Job{Version: 1, Hostname: "h"}, dir, "")
	_, el := newElement(t, r, res)
	_, vres := build(t, &job.Job{Version: 1, Hostname: "h", Media: job.MediaVFAT}, dir, "")
	vr, _ := build(t, &job.Job{Version: 1, Hostname: "h", Media: job.MediaVFAT}, dir, "")
	_, vel := newElement(t, vr, vres)
	for _, c := range []struct{ name, xml, want string }{
		{"future layout", strings.Replace(el, `iso-layout="2"`, `iso-layout="3"`, 1), `image@iso-layout: 3 is not an ISO layout this vmpayload builds`},
		{"zero", strings.Replace(el, `iso-layout="2"`, `iso-layout="0"`, 1), `image@iso-layout: "0" is not a layout number`},
		{"leading zero", strings.Replace(el, `iso-layout="2"`, `iso-layout="02"`, 1), `image@iso-layout: "02" is not a layout number`},
		{"not a number", strings.Replace(el, `iso-layout="2"`, `iso-layout="joliet"`, 1), `image@iso-layout: "joliet" is not a layout number`},
		{"vfat with a layout", strings.Replace(vel, `content-hash=`, `iso-layout="2" content-hash=`, 1), `image@iso-layout: a vfat image has no ISO layout`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := FromDomainXML(domainXML(c.xml))
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("FromDomainXML: %v, want a FieldError saying %q", err, c.want)
			}
		})
	}
	// an explicit iso-layout="1" is the go-diskfs layout, rendered without it
	rc, ok, err := FromDomainXML(domainXML(strings.Replace(el, `iso-layout="2"`, `iso-layout="1"`, 1)))
	if err != nil || !ok || rc.ISOLayout != image.ISOLayoutGoDiskfs {
		t.Fatalf("iso-layout=\"1\": %+v %v %v", rc, ok, err)
	}
	if again, _ := rc.Element(testKeys); strings.Contains(again, "iso-layout") {
		t.Errorf("a go-diskfs recipe renders with iso-layout: %s", again)
	}
}

// TestReleaseRecipesRenderUnchanged: a recipe written by an earlier
// release (no iso-layout) is read as the go-diskfs layout and renders to
// the same text, so re-recording it changes nothing.
func TestReleaseRecipesRenderUnchanged(t *testing.T) {
	paths, err := filepath.Glob("testdata/release/*.xml")
	must(t, err)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		must(t, err)
		el := strings.TrimSpace(string(b))
		rc, ok, err := FromDomainXML(domainXML(el))
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", p, ok, err)
		}
		want := image.ISOLayout(0)
		if rc.Media == job.MediaISO {
			want = image.ISOLayoutGoDiskfs
		}
		if rc.ISOLayout != want {
			t.Errorf("%s: ISOLayout %d, want %d", p, rc.ISOLayout, want)
		}
		// in clear it renders as recorded; sealed, it opens to the same job
		if again, err := rc.render(nil, true); err != nil || again != el {
			t.Errorf("%s renders differently (%v):\n%s\n%s", p, err, el, again)
		}
		sealed, err := rc.Element(testKeys)
		must(t, err)
		back, ok, err := FromDomainXML(domainXML(sealed))
		if err != nil || !ok || back.Open(testKeys) != nil {
			t.Fatalf("%s sealed: %v %v", p, ok, err)
		}
		if again, err := back.render(nil, true); err != nil || again != el {
			t.Errorf("%s sealed and opened renders differently (%v):\n%s\n%s", p, err, el, again)
		}
	}
}
