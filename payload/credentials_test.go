package payload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
)

// TestCheckCredentials: a credentials job's check resolves its secrets
// (each problem under its field, never quoted) and the delivery's limits,
// and renders named values whose shape is its delivery's: no file for
// SMBIOS, one file per credential for fw_cfg.
func TestCheckCredentials(t *testing.T) {
	dir := t.TempDir()
	const secret = "s3cret-token"
	if err := os.WriteFile(filepath.Join(dir, "tok"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	opt := CheckOptions{Secrets: true, SecretsDir: dir, Agent: true}
	big := strings.Repeat("x", 61000)
	for _, c := range []struct {
		name   string
		doc    string
		want   []string // field|code
		shape  Shape
		names  []string
		secret string // a secret's content, never in the report
	}{
		{"smbios", `{"version":1,"domain":"d","format":"credentials","hostname":"h1","motd":"hi\n"}`, nil, ShapeInline,
			[]string{"firstboot.hostname", "login.motd", "system.hostname"}, ""},
		{"fwcfg with a secret", `{"version":1,"domain":"d","format":"credentials","timezone":"UTC","credential_secrets":{"app.token":"tok"}}`, nil, ShapeParts,
			[]string{"app.token", "firstboot.timezone"}, ""},
		{"missing secret", `{"version":1,"domain":"d","format":"credentials","credential_secrets":{"app.token":"nope"}}`,
			[]string{"credential_secrets.app.token|not_found"}, 0, nil, ""},
		{"password secret (plaintext: no delivery)", `{"version":1,"domain":"d","format":"credentials","users":[{"name":"root","password_secret":"nope"}]}`,
			[]string{"users[0].password_secret|invalid"}, 0, nil, ""},
		{"smbios too large", `{"version":1,"domain":"d","format":"credentials","credentials_delivery":"smbios","credentials":{"a.b":"` + big + `"}}`,
			[]string{"credentials_delivery|too_large"}, 0, nil, ""},
		{"secret by smbios", `{"version":1,"domain":"d","format":"credentials","credentials_delivery":"smbios","credential_secrets":{"app.token":"tok"}}`,
			[]string{"credential_secrets.app.token|conflict"}, 0, nil, secret},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, checked, rep := Check([]byte(c.doc), opt)
			var got []string
			for _, e := range rep.Errors {
				got = append(got, e.Field+"|"+string(e.Code))
				if c.secret != "" && strings.Contains(e.Message, c.secret) {
					t.Errorf("the report quotes the secret: %s", e.Message)
				}
			}
			if len(c.want) > 0 {
				if !slices.Equal(got, c.want) {
					t.Fatalf("report %v, want %v", got, c.want)
				}
				if checked != nil {
					t.Fatal("a refused job was checked")
				}
				return
			}
			if len(got) > 0 || checked == nil {
				t.Fatalf("report %v (checked %v)", got, checked != nil)
			}
			rd, err := Render(checked, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rd.Shape() != c.shape {
				t.Fatalf("shape %d, want %d", rd.Shape(), c.shape)
			}
			if !slices.Equal(rd.Names(), c.names) {
				t.Errorf("names %v, want %v", rd.Names(), c.names)
			}
			switch c.shape {
			case ShapeInline:
				if rd.Parts() != nil || len(rd.Inline()) != len(c.names) {
					t.Errorf("inline %d values, parts %d", len(rd.Inline()), len(rd.Parts()))
				}
			case ShapeParts:
				ps := rd.Parts()
				if rd.Inline() != nil || len(ps) != len(c.names) {
					t.Fatalf("parts %d, inline %d", len(ps), len(rd.Inline()))
				}
				if ps[0].Name != "opt/io.systemd.credentials/app.token" || string(ps[0].Data) != secret || !ps[0].Secret {
					t.Errorf("part 0 = %q secret %v", ps[0].Name, ps[0].Secret)
				}
			}
			if _, err := rd.Write(context.Background(), filepath.Join(t.TempDir(), "x"), Options{}); err == nil {
				t.Error("Write wrote named values as one file")
			}
		})
	}
}

// TestCredentialsContentHash: the content hash (which names the files)
// changes with every value but a secret's, whose digest never reaches a
// file name.
func TestCredentialsContentHash(t *testing.T) {
	dir := t.TempDir()
	hash := func(doc, secret string) string {
		if err := os.WriteFile(filepath.Join(dir, "tok"), []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
		_, c, rep := Check([]byte(doc), CheckOptions{Secrets: true, SecretsDir: dir})
		if !rep.OK() {
			t.Fatal(rep.Err())
		}
		rd, err := Render(c, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return rd.ContentHash()
	}
	const a = `{"version":1,"format":"credentials","timezone":"UTC","credential_secrets":{"app.token":"tok"}}`
	const b = `{"version":1,"format":"credentials","timezone":"Europe/Berlin","credential_secrets":{"app.token":"tok"}}`
	if hash(a, "one") != hash(a, "two") {
		t.Error("a secret's content changed the content hash")
	}
	if hash(a, "one") == hash(b, "one") {
		t.Error("another time zone kept the content hash")
	}
	if len(hash(a, "one")) != 64 {
		t.Error("content hash is not 64 hex digits")
	}
}

// TestWritePart: a part file is written atomically with mode 0600, a
// digest that differs writes nothing, and PartIntact checks the bytes.
func TestWritePart(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "u-0123.app.token")
	data := []byte("value\x00binary")
	if err := WritePart(context.Background(), p, data, Options{GID: -1}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, err %v", fi.Mode(), err)
	}
	if !PartIntact(p, data) || PartIntact(p, []byte("other")) {
		t.Error("PartIntact")
	}
	q := filepath.Join(dir, "other")
	if err := WritePart(context.Background(), q, data, Options{GID: -1, ExpectSHA256: strings.Repeat("0", 64)}); !errors.Is(err, image.ErrChecksum) {
		t.Errorf("a wrong digest: %v", err)
	}
	if _, err := os.Lstat(q); err == nil {
		t.Error("a refused part was written")
	}
	if err := os.Symlink(p, q); err != nil {
		t.Fatal(err)
	}
	if err := WritePart(context.Background(), q, data, Options{GID: -1}); err == nil {
		t.Error("a symlink was replaced")
	}
	if PartIntact(q, data) {
		t.Error("PartIntact followed a symlink")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("temporary files left: %v", ents)
	}
}

var _ = job.CodeInvalid
