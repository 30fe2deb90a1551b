package recipe

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
)

// TestSysprepRecipe: a sysprep payload (floppy or CD-ROM, answer file
// inline or by secret) is recorded with its secrets as references only
// (no password, no secret answer file text), rebuilds byte-identically
// from the recipe read back from domain XML, and a changed password is
// reported by its field with nothing written.
func TestSysprepRecipe(t *testing.T) {
	pw, _ := os.ReadFile(filepath.Join(secretsDir, "sysprep-admin-password"))
	password := strings.TrimSpace(string(pw))
	for name, j := range payloadtest.SysprepExamples(t, "../../configs/examples/windows") {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			r, res := build(t, j, dir, secretsDir)
			orig, err := os.ReadFile(res.Path)
			if err != nil {
				t.Fatal(err)
			}
			rc, el := newElement(t, r, res)
			for _, leak := range []string{password, xmlEscape(password), "Adm1n"} {
				if strings.Contains(el, leak) {
					t.Fatalf("the recipe holds the administrator password (%q): %s", leak, el)
				}
			}
			if rc.Job.AdminPasswordSecret != "sysprep-admin-password" || rc.Label != "SYSPREP" || rc.Format != job.FormatSysprep {
				t.Errorf("recipe %+v", rc)
			}
			if j.SysprepSecret != "" && (rc.Job.Sysprep != "" || strings.Contains(el, "oobeSystem")) {
				t.Errorf("the secret answer file's text is in the recipe: %s", el)
			}
			back := roundTrip(t, el)
			if err := os.Remove(res.Path); err != nil {
				t.Fatal(err)
			}
			out, err := Rebuild(context.Background(), back, RebuildOptions{Keys: testKeys, PayloadDir: dir, SecretsDir: secretsDir, GID: -1})
			if err != nil || out != OutcomeRebuilt {
				t.Fatalf("Rebuild: %q %v", out, err)
			}
			if got, _ := os.ReadFile(res.Path); !bytes.Equal(got, orig) {
				t.Fatalf("the rebuilt image differs from the original")
			}
			// another password: refused by name, nothing written
			sd := payloadtest.SysprepSecrets(t, secretsDir, "Changed-Pa55")
			os.Remove(res.Path)
			_, err = Rebuild(context.Background(), back, RebuildOptions{Keys: testKeys, PayloadDir: dir, SecretsDir: sd, GID: -1})
			if !errors.Is(err, ErrContentChanged) || !strings.Contains(err.Error(), `"sysprep-admin-password" (admin_password_secret)`) || strings.Contains(err.Error(), "Changed-Pa55") {
				t.Errorf("Rebuild with another password: %v", err)
			}
			if _, err := os.Stat(res.Path); !os.IsNotExist(err) {
				t.Errorf("a refused rebuild wrote %s", res.Path)
			}
		})
	}
}
