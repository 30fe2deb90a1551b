package recipe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Recipes from a release (issue 33 item 5): testdata/release holds the
// recipe `vmpayload recipe` printed for every example job in
// configs/examples that has one, recorded with main at b426220 (before
// issue 33 made the in-memory ISO writer the only ISO producer), and the
// secrets those jobs read, as they were then. Every one must rebuild to its
// recorded bytes.
func TestRebuildReleaseRecipes(t *testing.T) {
	paths, err := filepath.Glob("testdata/release/*.xml")
	must(t, err)
	if len(paths) < 15 {
		t.Fatalf("testdata/release holds %d recipes; the corpus is incomplete", len(paths))
	}
	media := map[string]int{}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			b, err := os.ReadFile(p)
			must(t, err)
			rc, ok, err := FromDomainXML(domainXML(strings.TrimSpace(string(b))))
			if err != nil || !ok {
				t.Fatalf("FromDomainXML: %v %v", ok, err)
			}
			media[string(rc.Media)+" "+rc.Label]++
			dir := t.TempDir()
			rc.Path = filepath.Join(dir, filepath.Base(rc.Path))
			opt := RebuildOptions{Keys: testKeys, PayloadDir: dir, SecretsDir: "testdata/release/secrets", Mode: 0o640, GID: -1}
			out, err := Rebuild(context.Background(), rc, opt)
			if err != nil || out != OutcomeRebuilt {
				t.Fatalf("Rebuild: %q %v", out, err)
			}
			if got := fileSHA256(t, rc.Path); got != rc.SHA256 {
				t.Errorf("rebuilt image has sha256 %s, the release recorded %s", got, rc.SHA256)
			}
			if out, err := Rebuild(context.Background(), rc, opt); err != nil || out != OutcomeIntact {
				t.Errorf("second Rebuild: %q %v", out, err)
			}
		})
	}
	for _, m := range []string{"iso cidata", "iso config-2", "vfat cidata"} {
		if media[m] == 0 {
			t.Errorf("no release recipe with %s (have %v)", m, media)
		}
	}
}

func fileSHA256(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
