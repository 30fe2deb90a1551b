package recipe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
)

const (
	sealUUID1 = "5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	sealUUID2 = "6a1b2c3d-4e5f-4061-9273-8495a6b7c8d9"
)

// secretJob carries every kind of secret-ish value a recipe keeps: a
// password (recorded as its hash), inline file content, inline user-data and
// a generated random seed (recorded as its data).
func secretJob() *job.Job {
	return &job.Job{
		Version: 1, Hostname: "h",
		Users:      []job.User{{Name: "u", Password: "Pw-Secret-1"}},
		Files:      []job.File{{Path: "/etc/app/token", Content: "FILE-SECRET-CONTENT"}},
		UserData:   "#cloud-config\nruncmd:\n  - echo USERDATA-SECRET\n",
		RandomSeed: &job.RandomSeed{GenerateBytes: 32},
	}
}

// buildFor renders j and writes its image into dir under the name the agent
// gives a domain with uuid.
func buildFor(t *testing.T, j *job.Job, dir, uuid string) (*payload.Rendered, payload.Result) {
	t.Helper()
	r, err := payloadtest.Render(j, "", payload.Options{})
	must(t, err)
	res, err := r.Write(context.Background(), filepath.Join(dir, r.ImageName(uuid)), payload.Options{GID: -1, NoSync: true})
	must(t, err)
	return r, res
}

// sealedDir is a secrets directory whose key file was made by
// seal.LoadOrCreate, as the agent makes it.
func sealedDir(t *testing.T) (string, *seal.Keyring) {
	t.Helper()
	d := filepath.Join(t.TempDir(), "secrets")
	k, err := seal.LoadOrCreate(KeyFile(d))
	must(t, err)
	return d, k
}

// sealed builds secretJob's image into dir for the domain uuid and returns
// its recipe, the recipe's element sealed with keys, and the image.
func sealed(t *testing.T, dir, uuid string, keys *seal.Keyring) (*Recipe, string, payload.Result) {
	t.Helper()
	r, res := buildFor(t, secretJob(), dir, uuid)
	rc, el := newElementWith(t, r, res, keys)
	return rc, el, res
}

// TestSealedRecipeHoldsNoSecret: the element written into the domain's
// metadata holds no password hash, inline file content, inline user-data or
// random seed in clear (nor the job's JSON at all), and rebuilds the image
// byte-identical with the key in the secrets directory.
func TestSealedRecipeHoldsNoSecret(t *testing.T) {
	dir := t.TempDir()
	secrets, keys := sealedDir(t)
	rc, el, res := sealed(t, dir, sealUUID1, keys)
	hash := rc.Job.Users[0].PasswordHash
	seed := rc.Job.RandomSeed.Data
	if hash == "" || seed == "" {
		t.Fatalf("the recipe recorded no hash or seed: %+v", rc.Job)
	}
	for _, s := range []string{hash, hash[:20], seed, seed[:16], "FILE-SECRET-CONTENT", "USERDATA-SECRET", "Pw-Secret-1", "password_hash", "random_seed", "user_data", `"files"`} {
		if strings.Contains(el, s) {
			t.Errorf("the recipe element holds %q in clear:\n%s", s, el)
		}
	}
	back, ok, err := FromDomainXML(domainXML(el))
	if err != nil || !ok || !back.Sealed() || back.SealedKey() != keys.Current() {
		t.Fatalf("reading the sealed recipe: %v %v %+v", ok, err, back)
	}
	must(t, os.Remove(res.Path))
	out, err := Rebuild(context.Background(), back, RebuildOptions{PayloadDir: dir, SecretsDir: secrets, GID: -1, DomainUUID: sealUUID1})
	if err != nil || out != OutcomeRebuilt || fileSHA256(t, res.Path) != res.SHA256 {
		t.Fatalf("Rebuild of the sealed recipe: %q %v", out, err)
	}
	if err := back.Open(keys); err != nil || back.Job.Users[0].PasswordHash != hash || back.Job.Files[0].Content != "FILE-SECRET-CONTENT" || back.Job.RandomSeed.Data != seed {
		t.Errorf("opened: %v %+v", err, back.Job)
	}
}

// TestSealedRecipeMissingKey: a host without the key file (migrated to
// without copying it), or with another key, refuses the rebuild with an
// error naming the key file and what to do; nothing is written.
func TestSealedRecipeMissingKey(t *testing.T) {
	dir := t.TempDir()
	_, keys := sealedDir(t)
	_, el, res := sealed(t, dir, sealUUID1, keys)
	back, _, err := FromDomainXML(domainXML(el))
	must(t, err)
	must(t, os.Remove(res.Path))

	none := filepath.Join(t.TempDir(), "secrets")
	_, err = Rebuild(context.Background(), back, RebuildOptions{PayloadDir: dir, SecretsDir: none, GID: -1})
	if !errors.Is(err, seal.ErrNoKey) || !strings.Contains(err.Error(), KeyFile(none)) || !strings.Contains(err.Error(), "copy it from the host") {
		t.Errorf("no key file: %v", err)
	}
	other, _ := sealedDir(t)
	_, err = Rebuild(context.Background(), back, RebuildOptions{PayloadDir: dir, SecretsDir: other, GID: -1})
	if !errors.Is(err, seal.ErrNoKey) || !strings.Contains(err.Error(), KeyFile(other)) || !strings.Contains(err.Error(), keys.Current()) {
		t.Errorf("another key: %v", err)
	}
	wantNoImage(t, res.Path)
}

// TestSealedRecipeRotation: after a new key is appended, new recipes are
// sealed with it and recipes sealed with the old key still rebuild; a host
// holding only the new key cannot open the old ones.
func TestSealedRecipeRotation(t *testing.T) {
	dir := t.TempDir()
	secrets, _ := sealedDir(t)
	seal1 := func(uuid string) (*Recipe, payload.Result) {
		keys, err := seal.LoadOrCreate(KeyFile(secrets))
		must(t, err)
		_, el, res := sealed(t, dir, uuid, keys)
		back, _, err := FromDomainXML(domainXML(el))
		must(t, err)
		return back, res
	}
	old, oldRes := seal1(sealUUID1)
	line, err := seal.NewKeyLine()
	must(t, err)
	f, err := os.OpenFile(KeyFile(secrets), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString(line)
	must(t, err)
	must(t, f.Close())
	nu, nuRes := seal1(sealUUID2)
	if old.SealedKey() == nu.SealedKey() {
		t.Fatalf("the new recipe is sealed with the old key %s", old.SealedKey())
	}
	for _, c := range []struct {
		rc   *Recipe
		res  payload.Result
		uuid string
	}{{old, oldRes, sealUUID1}, {nu, nuRes, sealUUID2}} {
		must(t, os.Remove(c.res.Path))
		if out, err := Rebuild(context.Background(), c.rc, RebuildOptions{PayloadDir: dir, SecretsDir: secrets, GID: -1, DomainUUID: c.uuid}); err != nil || out != OutcomeRebuilt || fileSHA256(t, c.res.Path) != c.res.SHA256 {
			t.Errorf("key %s: %q %v", c.rc.SealedKey(), out, err)
		}
	}
	onlyNew := filepath.Join(t.TempDir(), "s")
	must(t, os.Mkdir(onlyNew, 0o700))
	must(t, os.WriteFile(KeyFile(onlyNew), []byte(line), 0o600))
	must(t, os.Remove(oldRes.Path))
	if _, err := Rebuild(context.Background(), old, RebuildOptions{PayloadDir: dir, SecretsDir: onlyNew, GID: -1}); !errors.Is(err, seal.ErrNoKey) {
		t.Errorf("old recipe on a host with only the new key: %v", err)
	}
}

// TestSealedRecipeTampered: a sealed job is bound to its image attributes;
// moved to another recipe (another domain's image) or with an attribute
// changed it does not open.
func TestSealedRecipeTampered(t *testing.T) {
	dir := t.TempDir()
	secrets, keys := sealedDir(t)
	r1, res1 := buildFor(t, secretJob(), dir, sealUUID1)
	j2 := secretJob()
	j2.Hostname = "h2"
	r2, res2 := buildFor(t, j2, dir, sealUUID2)
	rc1, err := New(r1, res1)
	must(t, err)
	rc2, err := New(r2, res2)
	must(t, err)
	el1, _ := rc1.Element(keys)
	el2, _ := rc2.Element(keys)
	blob := func(el string) string {
		return el[strings.Index(el, "<vmpayload:sealed"):strings.Index(el, "</vmpayload:recipe>")]
	}
	moved := strings.Replace(el1, blob(el1), blob(el2), 1)
	back, ok, err := FromDomainXML(domainXML(moved))
	if err != nil || !ok {
		t.Fatalf("%v %v", ok, err)
	}
	must(t, os.Remove(res1.Path))
	if _, err := Rebuild(context.Background(), back, RebuildOptions{PayloadDir: dir, SecretsDir: secrets, GID: -1}); err == nil || !strings.Contains(err.Error(), "altered") {
		t.Errorf("a blob moved to another recipe: %v", err)
	}
	wantNoImage(t, res1.Path)
}

// TestRebuildRefusesOtherDomainsImage: a recipe in one domain naming
// another domain's image (<other uuid>-….iso in the payload directory) is
// refused and changes nothing, whether that image is intact or damaged.
func TestRebuildRefusesOtherDomainsImage(t *testing.T) {
	dir := t.TempDir()
	secrets, keys := sealedDir(t)
	r, res := buildFor(t, secretJob(), dir, sealUUID2) // vm2's image
	rc, err := New(r, res)
	must(t, err)
	el, _ := rc.Element(keys)
	back, _, err := FromDomainXML(domainXML(el))
	must(t, err)
	for _, damaged := range []bool{false, true} {
		if damaged {
			must(t, os.WriteFile(res.Path, []byte("vm2's own bytes"), 0o640))
		}
		before, err := os.ReadFile(res.Path)
		must(t, err)
		_, err = Rebuild(context.Background(), back, RebuildOptions{PayloadDir: dir, SecretsDir: secrets, GID: -1, DomainUUID: sealUUID1})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), sealUUID1) || !strings.Contains(err.Error(), res.Path) {
			t.Errorf("damaged %v: %v", damaged, err)
		}
		after, err := os.ReadFile(res.Path)
		must(t, err)
		if string(after) != string(before) {
			t.Errorf("damaged %v: vm2's image was changed", damaged)
		}
	}
	// its own domain rebuilds it; upper case spelling of the UUID too
	if out, err := Rebuild(context.Background(), back, RebuildOptions{PayloadDir: dir, SecretsDir: secrets, GID: -1, DomainUUID: strings.ToUpper(sealUUID2)}); err != nil || out != OutcomeRebuilt {
		t.Errorf("own domain: %q %v", out, err)
	}
}
