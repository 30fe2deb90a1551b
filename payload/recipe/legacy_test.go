package recipe

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// legacyJolietRecipe is a recipe recorded by vmpayload before issue 14's
// Joliet root fix (main at 376e2b4; only the path was moved to the
// default payload directory): a nocloud ISO whose last file, vendor-data,
// is 2048 bytes, so its recorded image has go-diskfs's zeroed Joliet root.
const legacyJolietRecipe = "testdata/legacy-joliet-vendor-data-2048.xml"

func loadLegacyRecipe(t *testing.T) (*Recipe, string) {
	t.Helper()
	b, err := os.ReadFile(legacyJolietRecipe)
	must(t, err)
	rc, ok, err := FromDomainXML(domainXML(strings.TrimSpace(string(b))))
	if err != nil || !ok {
		t.Fatalf("FromDomainXML(%s): %v %v", legacyJolietRecipe, ok, err)
	}
	dir := t.TempDir()
	rc.Path = filepath.Join(dir, filepath.Base(rc.Path))
	return rc, dir
}

// TestRebuildLegacyJolietRecipe: a recipe recorded before the Joliet fix
// rebuilds to exactly its recorded bytes (the legacy layout), while the
// same job built today gets the fixed layout (other bytes, a Joliet tree
// isoinfo lists); a changed content is refused with ErrContentChanged.
func TestRebuildLegacyJolietRecipe(t *testing.T) {
	rc, dir := loadLegacyRecipe(t)
	out, err := Rebuild(context.Background(), rc, RebuildOptions{Keys: testKeys, PayloadDir: dir, Mode: 0o640, GID: -1})
	if err != nil || out != OutcomeRebuilt {
		t.Fatalf("Rebuild of the pre-fix recipe: %q %v", out, err)
	}
	b, err := os.ReadFile(rc.Path)
	must(t, err)
	if got := testenv.SHA256(b); got != rc.SHA256 || int64(len(b)) != rc.Size {
		t.Fatalf("rebuilt image has sha256 %s and %d bytes, recorded %s and %d", got, len(b), rc.SHA256, rc.Size)
	}
	if out, err := Rebuild(context.Background(), rc, RebuildOptions{Keys: testKeys, PayloadDir: dir, GID: -1}); err != nil || out != OutcomeIntact {
		t.Errorf("second Rebuild: %q %v", out, err)
	}

	// The same job built today: the fixed layout, which Joliet readers see.
	r, res := build(t, &rc.Job, t.TempDir(), "")
	if res.SHA256 == rc.SHA256 || res.Size != rc.Size {
		t.Errorf("a new build of the recorded job has sha256 %s, size %d; want the fixed layout (not %s) of the same size %d", res.SHA256, res.Size, rc.SHA256, rc.Size)
	}
	files := r.Spec().Entries
	if last := files[len(files)-1]; last.Path != "vendor-data" || len(last.Data) != 2048 {
		t.Fatalf("the recorded job renders %q (%d bytes) last; the fixture no longer has the Joliet quirk", last.Path, len(last.Data))
	}
	for p, want := range map[string]int{res.Path: len(files), rc.Path: 0} {
		l, err := exec.Command("isoinfo", "-J", "-l", "-i", p).CombinedOutput()
		if err != nil {
			t.Fatalf("isoinfo -J -l %s: %v\n%s", p, err, l)
		}
		listed := map[string]bool{}
		for _, line := range strings.Split(string(l), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "-") {
				listed[f[len(f)-1]] = true
			}
		}
		n := 0
		for _, f := range files {
			if listed[f.Path] {
				n++
			}
		}
		if n != want {
			t.Errorf("isoinfo -J -l %s lists %d of the %d files, want %d:\n%s", p, n, len(files), want, l)
		}
	}

	// Changed content: refused, nothing written.
	for name, change := range map[string]func(rc *Recipe){
		"vendor-data changed, still 2048 bytes": func(rc *Recipe) { rc.Job.VendorData = strings.Replace(rc.Job.VendorData, "x", "y", 1) },
		"vendor-data changed":                   func(rc *Recipe) { rc.Job.VendorData += "\n" },
		"hostname changed":                      func(rc *Recipe) { rc.Job.Hostname = "vm10" },
	} {
		t.Run(name, func(t *testing.T) {
			rc, dir := loadLegacyRecipe(t)
			change(rc)
			_, err := Rebuild(context.Background(), rc, RebuildOptions{Keys: testKeys, PayloadDir: dir, GID: -1})
			if !errors.Is(err, ErrContentChanged) {
				t.Errorf("Rebuild: %v, want ErrContentChanged", err)
			}
			wantNoImage(t, rc.Path)
		})
	}
}
