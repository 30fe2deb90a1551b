package recipe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload"
)

const valuesUUID = "6f1c1a8e-55b0-4a4e-9d1e-3c1f0b8a9e01"

// valuesRecipe renders a credentials job (members after version and
// format), writes its part files into dir as the agent names them, and
// returns the rendered payload and its recipe.
func valuesRecipe(t *testing.T, members, dir, secrets string) (*payload.Rendered, *Recipe) {
	t.Helper()
	_, c, rep := payload.Check([]byte(`{"version":1,"format":"credentials",`+members+`}`), payload.CheckOptions{Secrets: true, SecretsDir: secrets, Build: true})
	if !rep.OK() {
		t.Fatal(rep.Err())
	}
	rd, err := payload.Render(c, payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var paths map[string]string
	for _, p := range rd.Parts() {
		if paths == nil {
			paths = map[string]string{}
		}
		paths[p.Key] = filepath.Join(dir, rd.PartName(valuesUUID, p.Key))
		must(t, payload.WritePart(context.Background(), paths[p.Key], p.Data, payload.Options{GID: -1}))
	}
	rc, err := NewValues(rd, paths)
	if err != nil {
		t.Fatal(err)
	}
	return rd, rc
}

// TestValuesRecipe (issue 42): a credentials recipe renders its values
// (names; files with size, and sha256 unless secret) in clear and its job
// sealed; read back it lists the same files and names, opens, and rebuilds
// each missing file byte for byte (a secret's too), is intact when they
// are in place, refuses content that changed, and writes nothing then. An
// SMBIOS recipe has names and no files: nothing to rebuild.
func TestValuesRecipe(t *testing.T) {
	dir, secrets := t.TempDir(), t.TempDir()
	const secret = "cint-recipe-secret"
	must(t, os.WriteFile(filepath.Join(secrets, "tok"), []byte(secret), 0o600))
	keys, err := seal.LoadOrCreate(KeyFile(secrets))
	must(t, err)
	opt := RebuildOptions{PayloadDir: dir, SecretsDir: secrets, GID: -1, DomainUUID: valuesUUID}

	rd, rc := valuesRecipe(t, `"credentials_delivery":"fwcfg","timezone":"UTC","credential_secrets":{"app.token":"tok"}`, dir, secrets)
	el, err := rc.Element(keys)
	must(t, err)
	if strings.Contains(el, secret) || strings.Contains(el, "UTC") {
		t.Errorf("the element carries a value in clear: %s", el)
	}
	got, ok, err := FromDomainXML(domainXML(el))
	if err != nil || !ok {
		t.Fatalf("read back: %v %v", ok, err)
	}
	if !slices.Equal(got.Files(), rc.Files()) || !slices.Equal(got.Names(), []string{"app.token", "firstboot.timezone"}) || got.InlineNames() != nil {
		t.Fatalf("files %v names %v inline %v", got.Files(), got.Names(), got.InlineNames())
	}
	if got.Values[0].SHA256 != "" || got.Values[1].SHA256 == "" {
		t.Errorf("sha256 of the secret %q, of the time zone %q", got.Values[0].SHA256, got.Values[1].SHA256)
	}
	if again, _ := got.Element(nil); again != el {
		t.Errorf("a sealed recipe read back renders otherwise:\n%s\n%s", el, again)
	}
	if o, err := Rebuild(context.Background(), got, opt); err != nil || o != OutcomeIntact {
		t.Fatalf("intact: %v %v", o, err)
	}
	for _, f := range got.Files() {
		must(t, os.Remove(f))
	}
	if o, err := Rebuild(context.Background(), got, opt); err != nil || o != OutcomeRebuilt {
		t.Fatalf("rebuild: %v %v", o, err)
	}
	for i, p := range rd.Parts() {
		if !payload.PartIntact(got.Values[i].Path, p.Data) {
			t.Errorf("%s not rebuilt byte for byte", p.Key)
		}
	}
	// another DomainUUID: refused
	if _, err := Rebuild(context.Background(), got, RebuildOptions{PayloadDir: dir, SecretsDir: secrets, GID: -1, DomainUUID: "00000000-0000-4000-8000-000000000000"}); !errors.Is(err, ErrRefused) {
		t.Errorf("another domain's files: %v", err)
	}
	// a non-secret value whose file was damaged and whose content changed:
	// refused, nothing written (the secret's changed content is taken)
	must(t, os.WriteFile(got.Values[1].Path, []byte("XXX"), 0o600))
	changed := *got
	changed.Values = slices.Clone(got.Values)
	changed.Values[1].SHA256 = strings.Repeat("a", 64)
	changed.sealedKey, changed.sealedBlob = "", nil
	changed.Job = rc.Job
	if _, err := Rebuild(context.Background(), &changed, opt); !errors.Is(err, ErrContentChanged) {
		t.Errorf("changed content: %v", err)
	}
	if b, _ := os.ReadFile(got.Values[1].Path); string(b) != "XXX" {
		t.Errorf("a refused rebuild wrote %q", b)
	}

	// SMBIOS: names, no files
	_, sm := valuesRecipe(t, `"credentials_delivery":"smbios","hostname":"h"`, dir, secrets)
	el, err = sm.Element(keys)
	must(t, err)
	got, _, err = FromDomainXML(domainXML(el))
	if err != nil || got.Files() != nil || !slices.Equal(got.InlineNames(), []string{"firstboot.hostname", "system.hostname"}) {
		t.Fatalf("smbios recipe: %v files %v inline %v", err, got.Files(), got.InlineNames())
	}
	if o, err := Rebuild(context.Background(), got, opt); err != nil || o != OutcomeIntact {
		t.Errorf("smbios rebuild: %v %v", o, err)
	}
}

// TestValuesRecipeRefused: malformed values elements are refused naming
// the attribute.
func TestValuesRecipeRefused(t *testing.T) {
	const ch = "content-hash='0000000000000000000000000000000000000000000000000000000000000000'"
	sealed := "<vmpayload:sealed key='0123456789abcdef'>AAAA</vmpayload:sealed>"
	for _, c := range []struct{ values, want string }{
		{"<vmpayload:values format='nocloud' " + ch + "/>", "values@format"},
		{"<vmpayload:values format='credentials'/>", "values@content-hash"},
		{"<vmpayload:values format='credentials' " + ch + " media='iso'/>", "values@media"},
		{"<vmpayload:values format='credentials' " + ch + "><vmpayload:value name='a/b'/></vmpayload:values>", "value[0]@name"},
		{"<vmpayload:values format='credentials' " + ch + "><vmpayload:value name='a' path='/p/x.a'/></vmpayload:values>", "value@size"},
		{"<vmpayload:values format='credentials' " + ch + "><vmpayload:value name='a' path='/p/x.b' size='1'/></vmpayload:values>", "value[0]@path"},
		{"<vmpayload:values format='credentials' " + ch + "><vmpayload:value name='a' path='/p/x.a' size='1'/><vmpayload:value name='b'/></vmpayload:values>", "values"},
		{"<vmpayload:values format='credentials' " + ch + "><vmpayload:value name='a'/><vmpayload:value name='a'/></vmpayload:values>", "value[1]@name"},
	} {
		x := domainXML("<vmpayload:recipe xmlns:vmpayload='" + Namespace + "' version='1'>" + c.values + sealed + "</vmpayload:recipe>")
		_, _, err := FromDomainXML(x)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.want {
			t.Errorf("%s: %v, want field %s", c.values, err, c.want)
		}
	}
}
