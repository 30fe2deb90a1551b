package recipe

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

// TestButaneRecipeHoldsIgnition: the recipe of a job given as butane
// records the Ignition config Butane translated it to, as
// ignition_base64, never the Butane text, so that the hook rebuilds the
// image byte-identically without translating again (a later Butane may
// translate differently); the image is the one the same job with that
// ignition_base64 gives.
func TestButaneRecipeHoldsIgnition(t *testing.T) {
	src := "variant: fcos\nversion: 1.6.0\nstorage:\n  files:\n    - path: /etc/butane-marker\n      mode: 0600\n      contents:\n        inline: from butane\n"
	j := &job.Job{Version: 1, Domain: "vm13", Format: job.FormatIgnition, IgnitionDelivery: job.DeliveryConfigDrive,
		Hostname: "vm13", Users: []job.User{{Name: "core", Password: "hunter2-plaintext"}}, Butane: src}
	translated, problems := job.TranslateButane(src)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	dir := t.TempDir()
	r, res := build(t, j, dir, secretsDir)
	orig, err := os.ReadFile(res.Path)
	must(t, err)
	rc, el := newElement(t, r, res)
	if rc.Job.Butane != "" || rc.Job.IgnitionBase64 != base64.StdEncoding.EncodeToString(translated) {
		t.Fatalf("recipe job butane %q, ignition_base64 %q", rc.Job.Butane, rc.Job.IgnitionBase64)
	}
	if strings.Contains(el, "variant") || strings.Contains(el, "hunter2") {
		t.Fatalf("recipe holds the Butane text or a password: %s", el)
	}
	if j.Butane != src || j.IgnitionBase64 != "" {
		t.Errorf("the caller's job changed: %+v", j)
	}
	back := roundTrip(t, el)
	must(t, os.Remove(res.Path))
	out, err := Rebuild(context.Background(), back, RebuildOptions{Keys: testKeys, PayloadDir: dir, SecretsDir: secretsDir, GID: -1})
	if err != nil || out != OutcomeRebuilt {
		t.Fatalf("Rebuild: %q %v", out, err)
	}
	got, err := os.ReadFile(res.Path)
	must(t, err)
	if !bytes.Equal(got, orig) {
		t.Fatal("rebuilt image differs from the original")
	}
	// the same job with the translated config as ignition_base64
	j2 := *j
	j2.Butane, j2.IgnitionBase64 = "", base64.StdEncoding.EncodeToString(translated)
	dir2 := t.TempDir()
	r2, res2 := build(t, &j2, dir2, secretsDir)
	if res2.SHA256 != res.SHA256 || r2.Docs.ContentHash != r.Docs.ContentHash {
		t.Errorf("butane and its ignition_base64 give different images: %s %s", res.SHA256, res2.SHA256)
	}
}
