package owner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMarkersDoNotFollowSymlinks: a .owners that is a symlink is refused by
// Claim, Of, Forget and Stale, and nothing is written, read or removed where
// it points; a marker that is a symlink is neither read nor written through
// (Claim replaces the link itself).
func TestMarkersDoNotFollowSymlinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "vm-abc.iso")
	if err := os.WriteFile(filepath.Join(target, "vm-abc.iso"), []byte("other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, Dir)); err != nil {
		t.Fatal(err)
	}
	if err := Claim(img, "host-a"); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("Claim through a symlinked %s: %v", Dir, err)
	}
	if o, err := Of(img); err == nil || o != "" {
		t.Errorf("Of through a symlinked %s: %q %v", Dir, o, err)
	}
	if err := Forget(img); err == nil {
		t.Errorf("Forget through a symlinked %s succeeded", Dir)
	}
	if _, err := Stale(dir, "other"); err == nil {
		t.Errorf("Stale through a symlinked %s succeeded", Dir)
	}
	if b, err := os.ReadFile(filepath.Join(target, "vm-abc.iso")); err != nil || string(b) != "other\n" {
		t.Errorf("the symlink's target changed: %q %v", b, err)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 1 {
		t.Errorf("files were created in the symlink's target: %v", ents)
	}

	// a marker that is a symlink
	dir2 := t.TempDir()
	img2 := filepath.Join(dir2, "vm-def.iso")
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root-only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir2, Dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, Path(img2)); err != nil {
		t.Fatal(err)
	}
	if o, err := Of(img2); err == nil || o == "root-only" {
		t.Errorf("Of read through a symlinked marker: %q %v", o, err)
	}
	if err := Claim(img2, "host-a"); err != nil {
		t.Fatalf("Claim over a symlinked marker: %v", err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "root-only\n" {
		t.Errorf("Claim wrote through the symlinked marker: %q", b)
	}
	if fi, err := os.Lstat(Path(img2)); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the marker is not a regular file now: %v %v", fi, err)
	}
	if o, err := Of(img2); err != nil || o != "host-a" {
		t.Errorf("Of after Claim: %q %v", o, err)
	}
}
