package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/testenv"
)

const plaintext = "Plaintext-Hunter2-never-in-xml"

// emptyNodeHost opens a test-driver host with its own, empty state, so that
// ListDomains sees only the test's domains.
func emptyNodeHost(t *testing.T) *libvirtx.LibvirtHost {
	t.Helper()
	node := filepath.Join(t.TempDir(), "node.xml")
	if err := os.WriteFile(node, []byte("<node>\n</node>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := libvirtx.OpenHost("test://"+node, libvirtx.HostOptions{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func defineTestDomain(t *testing.T, h libvirtx.Host, name string) string {
	t.Helper()
	d, err := h.DefineXML(context.Background(), fmt.Sprintf(`<domain type='test'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os><features><acpi/></features><devices/></domain>`, name))
	if err != nil {
		t.Fatal(err)
	}
	return d.InactiveXML
}

// runDone runs the job document js through e and requires it to succeed.
func runDone(t *testing.T, e *Engine, js string) result.Result {
	t.Helper()
	r := runDoc(t, e, js, "t")
	if r.State != result.StateDone {
		t.Fatalf("job %s: %s %+v", js, r.State, r.Error)
	}
	return r
}

// TestRecipeFollowsAttachAndDetach runs a sequence of jobs on a stopped
// domain and checks the recipe in its persistent definition after each:
// written on attach (hashes only, no plaintext password), kept unchanged by
// a re-submitted job, replaced by a new one, removed for a prebuilt image
// and on detach. Nothing else in the definition changes.
func TestRecipeFollowsAttachAndDetach(t *testing.T) {
	h := emptyNodeHost(t)
	ctx := context.Background()
	name := "vmpx-recipe-seq"
	orig := defineTestDomain(t, h, name)
	e := newEngine(t, h)

	// A prebuilt image outside the payload directory.
	pj := &job.Job{Version: 1, Domain: name, Hostname: "prebuilt"}
	rd, err := payloadtest.Render(pj, "", payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seeds := t.TempDir()
	e.PrebuiltDirs = []string{seeds}
	prebuilt := filepath.Join(seeds, "prebuilt.iso")
	if _, err := rd.Write(ctx, prebuilt, payload.Options{GID: -1}); err != nil {
		t.Fatal(err)
	}

	jobA := fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","hostname":"a","users":[{"name":"alice","password":%q}]}`, name, plaintext)
	jobB := fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","hostname":"b"}`, name)
	jobS := fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","hostname":"s","random_seed":{"generate_bytes":32}}`, name)
	steps := []struct {
		name       string
		job        string
		wantRecipe bool
		sameXML    bool // the definition must not change at all
	}{
		{"attach with plaintext password", jobA, true, false},
		{"identical job resubmitted", jobA, true, true},
		{"new content", jobB, true, false},
		{"prebuilt image", fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","prebuilt_image":%q}`, name, prebuilt), false, false},
		{"built again", jobA, true, false},
		{"generated random seed", jobS, true, false},
		{"generated seed resubmitted: image and recipe reused", jobS, true, true},
		{"detach", fmt.Sprintf(`{"version":1,"domain":%q,"action":"detach"}`, name), false, false},
		{"detach again", fmt.Sprintf(`{"version":1,"domain":%q,"action":"detach"}`, name), false, true},
	}
	prev := orig
	for _, s := range steps {
		r := runDone(t, e, s.job)
		d, err := h.Domain(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		x := d.InactiveXML
		if strings.Contains(x, plaintext) {
			t.Fatalf("%s: the plaintext password is in the domain XML:\n%s", s.name, x)
		}
		if s.sameXML && x != prev {
			t.Errorf("%s: the definition changed:\n--- before\n%s\n--- after\n%s", s.name, prev, x)
		}
		prev = x
		rc, ok, err := recipe.FromDomainXML(x)
		if err != nil {
			t.Fatalf("%s: reading the recipe: %v\n%s", s.name, err, x)
		}
		if ok != s.wantRecipe {
			t.Fatalf("%s: recipe present %v, want %v:\n%s", s.name, ok, s.wantRecipe, x)
		}
		if !ok {
			continue
		}
		if r.Payload == nil || rc.Path != r.Payload.Path || rc.SHA256 != r.Payload.SHA256 || rc.InstanceID != r.Payload.InstanceID || rc.Size != r.Payload.Size {
			t.Errorf("%s: recipe %s sha256 %s iid %s, result %+v", s.name, rc.Path, rc.SHA256, rc.InstanceID, r.Payload)
		}
		if pd, found, _ := domxml.FindPayload(x); !found || pd.Path != rc.Path {
			t.Errorf("%s: drive holds %q, recipe names %q", s.name, pd.Path, rc.Path)
		}
		if strings.Count(x, recipe.Namespace) != 1 {
			t.Errorf("%s: %d recipe namespaces in the XML", s.name, strings.Count(x, recipe.Namespace))
		}
	}
	// libvirt adds the IDE controller the payload drive needed; nothing
	// else may differ.
	if withoutControllers(prev) != withoutControllers(orig) {
		t.Errorf("after detach the definition differs from the original:\n--- original\n%s\n--- now\n%s", orig, prev)
	}
}

func withoutControllers(x string) string {
	var out []string
	for _, l := range strings.Split(x, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "<controller ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestRecipeOnRunningDomainMediaChange: a media change on a running domain
// records the new recipe in the persistent definition (the test driver has
// no device changes; trayHost fakes a successful one).
func TestRecipeOnRunningDomainMediaChange(t *testing.T) {
	h := emptyNodeHost(t)
	ctx := context.Background()
	name := "vmpx-recipe-running"
	defineTestDomain(t, h, name)
	e := newEngine(t, &trayHost{Host: h})
	first := runDone(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"hostname":"one"}`, name))
	if first.DomainState != "running" {
		t.Fatalf("domain state %q after a start job", first.DomainState)
	}
	second := runDone(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"hostname":"two","users":[{"name":"u","password":%q}]}`, name, plaintext))
	d, err := h.Domain(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.InactiveXML, plaintext) {
		t.Fatalf("plaintext password in the definition:\n%s", d.InactiveXML)
	}
	rc, ok, err := recipe.FromDomainXML(d.InactiveXML)
	if err != nil || !ok {
		t.Fatalf("recipe after the media change: %v %v\n%s", ok, err, d.InactiveXML)
	}
	if rc.Path != second.Payload.Path || rc.SHA256 != second.Payload.SHA256 {
		t.Errorf("recipe names %s %s, result %s %s", rc.Path, rc.SHA256, second.Payload.Path, second.Payload.SHA256)
	}
	// The live definition too: a migration, save or managed save carries
	// it to the hook (issue 36: it still named the first image).
	live, err := h.LiveXML(ctx, d.UUID)
	if err != nil {
		t.Fatal(err)
	}
	lrc, ok, err := recipe.FromDomainXML(live)
	if err != nil || !ok {
		t.Fatalf("recipe in the live definition: %v %v\n%s", ok, err, live)
	}
	if lrc.Path != second.Payload.Path || lrc.SHA256 != second.Payload.SHA256 {
		t.Errorf("live recipe names %s %s, want the new image %s %s (the first was %s)", lrc.Path, lrc.SHA256, second.Payload.Path, second.Payload.SHA256, first.Payload.Path)
	}
	if strings.Contains(live, plaintext) {
		t.Errorf("plaintext password in the live definition")
	}
	// A detach removes it from the live definition as well.
	runDone(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"action":"detach"}`, name))
	if live, err = h.LiveXML(ctx, d.UUID); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := recipe.FromDomainXML(live); ok || err != nil {
		t.Errorf("recipe left in the live definition after a detach (%v)", err)
	}
}

// TestRebuildImages: at start-up a missing image is rebuilt byte-identical,
// an intact one is left alone, and a recipe whose secret vanished is logged
// as an error (naming the secret, never its content) without stopping the
// others.
func TestRebuildImages(t *testing.T) {
	h := emptyNodeHost(t)
	ctx := context.Background()
	secrets := t.TempDir()
	const secretValue = "Secret-Value-From-File-42"
	if err := os.WriteFile(filepath.Join(secrets, "pw"), []byte(secretValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.LockedBuffer{}
	e := &Engine{Host: h, PayloadDir: t.TempDir(), SecretsDir: secrets, ImageMode: 0o640, ImageGID: -1,
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	cases := []struct {
		name    string
		users   string
		prepare func(t *testing.T, img string)
		want    string // "rebuilt", "intact", "error"
	}{
		{"missing image", fmt.Sprintf(`[{"name":"alice","password":%q}]`, plaintext), func(t *testing.T, img string) { must(t, os.Remove(img)) }, "rebuilt"},
		{"damaged image", `[{"name":"bob","password_secret":"pw"}]`, func(t *testing.T, img string) { must(t, os.WriteFile(img, []byte("junk"), 0o640)) }, "rebuilt"},
		{"intact image", `[]`, func(t *testing.T, img string) {
			old := time.Now().Add(-time.Hour)
			must(t, os.Chtimes(img, old, old))
		}, "intact"},
		{"vanished secret", `[{"name":"carol","password_secret":"gone"}]`, func(t *testing.T, img string) {
			must(t, os.Remove(filepath.Join(secrets, "gone")))
			must(t, os.Remove(img))
		}, "error"},
	}
	must(t, os.WriteFile(filepath.Join(secrets, "gone"), []byte(secretValue+"-gone\n"), 0o600))
	type built struct {
		res   result.Result
		mtime time.Time
	}
	var got []built
	for i, c := range cases {
		name := fmt.Sprintf("vmpx-rebuild-%d", i)
		defineTestDomain(t, h, name)
		r := runDone(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","hostname":"h%d","users":%s}`, name, i, c.users))
		c.prepare(t, r.Payload.Path)
		var mt time.Time
		if st, err := os.Stat(r.Payload.Path); err == nil {
			mt = st.ModTime()
		}
		got = append(got, built{r, mt})
	}
	defs, err := e.ListDefined(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.RebuildImages(ctx, defs)
	if err != nil {
		t.Fatal(err)
	}
	if st != (RebuildStats{Rebuilt: 2, Intact: 1, Failed: 1}) {
		t.Errorf("stats %+v, want 2 rebuilt, 1 intact, 1 failed\n%s", st, logs)
	}
	for i, c := range cases {
		p := got[i].res.Payload
		switch c.want {
		case "rebuilt", "intact":
			if sum := testenv.FileSHA256(t, p.Path); sum != p.SHA256 {
				t.Errorf("%s: image sha256 %s, want the job result's %s", c.name, sum, p.SHA256)
			}
			if fi, err := os.Stat(p.Path); err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("%s: image mode %v (%v), want 0640", c.name, fi.Mode(), err)
			}
			if c.want == "intact" {
				if fi, _ := os.Stat(p.Path); !fi.ModTime().Equal(got[i].mtime) {
					t.Errorf("%s: intact image was rewritten", c.name)
				}
			}
		case "error":
			if _, err := os.Stat(p.Path); !os.IsNotExist(err) {
				t.Errorf("%s: an image was placed although the rebuild failed (%v)", c.name, err)
			}
			if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), `secret \"gone\" does not exist`) {
				t.Errorf("%s: no error logged naming the secret:\n%s", c.name, logs)
			}
		}
	}
	for _, secret := range []string{plaintext, secretValue} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("a secret is in the log:\n%s", logs)
		}
	}
	// Orphan collection keeps images named only by a recipe.
	n, err := e.CollectOrphans(ctx, defs)
	if err != nil || n != 0 {
		t.Errorf("orphan collection removed %d (%v)", n, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCollectOrphansListing: orphan collection judges the payload directory
// by one listing of the defined domains. An image that no listed domain
// names is removed when it predates the listing and kept when it changed
// after it (a domain defined since, whose image the libvirt hook built), and
// the image of a domain with a recipe is kept. ListDefined reads each
// recipe once; a recipe that cannot be read reaches RebuildImages as a
// failure.
func TestCollectOrphansListing(t *testing.T) {
	h := emptyNodeHost(t)
	ctx := context.Background()
	e := newEngine(t, h)
	defineTestDomain(t, h, "vmpx-listed")
	r := runDone(t, e, `{"version":1,"domain":"vmpx-listed","action":"attach","hostname":"listed"}`)
	// A domain whose recipe is unreadable (an unknown attribute).
	bad := defineTestDomain(t, h, "vmpx-badrecipe")
	bad = strings.Replace(bad, "</domain>", `<metadata><r:recipe xmlns:r="`+recipe.Namespace+`" version="1" colour="red"/></metadata></domain>`, 1)
	if _, err := h.DefineXML(ctx, bad); err != nil {
		t.Fatal(err)
	}

	old := filepath.Join(e.PayloadDir, "00000000-0000-0000-0000-000000000001-1111111111111111.iso")
	must(t, os.WriteFile(old, []byte("old"), 0o640))
	past := time.Now().Add(-time.Minute)
	must(t, os.Chtimes(old, past, past))
	must(t, os.Chtimes(r.Payload.Path, past, past))

	defs, err := e.ListDefined(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var withRecipe, unreadable []string
	for _, d := range defs.Domains {
		if d.Recipe != nil {
			withRecipe = append(withRecipe, d.Name)
		}
		if d.RecipeErr != nil {
			unreadable = append(unreadable, d.Name)
			if !strings.Contains(d.RecipeErr.Error(), "colour") {
				t.Errorf("recipe error %q does not name the attribute", d.RecipeErr)
			}
		}
	}
	if fmt.Sprint(withRecipe) != "[vmpx-listed]" || fmt.Sprint(unreadable) != "[vmpx-badrecipe]" {
		t.Fatalf("recipes read for %v, unreadable for %v", withRecipe, unreadable)
	}
	// Built after the listing: no listed domain names it.
	time.Sleep(20 * time.Millisecond)
	fresh := filepath.Join(e.PayloadDir, "00000000-0000-0000-0000-000000000002-2222222222222222.iso")
	must(t, os.WriteFile(fresh, []byte("fresh"), 0o640))

	if st, err := e.RebuildImages(ctx, defs); err != nil || st != (RebuildStats{Intact: 1, Failed: 1}) {
		t.Errorf("RebuildImages = %+v, %v; want 1 intact, 1 failed", st, err)
	}
	n, err := e.CollectOrphans(ctx, defs)
	if err != nil || n != 1 {
		t.Errorf("CollectOrphans removed %d (%v), want 1", n, err)
	}
	for p, want := range map[string]bool{old: false, fresh: true, r.Payload.Path: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: present=%v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}
