package ignition

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-semver/semver"
	ignconfig "github.com/coreos/ignition/v2/config"
	v30 "github.com/coreos/ignition/v2/config/v3_0"
	latest "github.com/coreos/ignition/v2/config/v3_7_experimental"
	"github.com/coreos/ignition/v2/config/v3_7_experimental/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/test/golden"
	"github.com/vmpayload/vmpayload/test/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const (
	keyAdmin = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ9UCj6yFbzrJRqgbKp1+pjOWpNQWIeq40ujmhEHvz3p admin@example"
	hostPriv = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot parsed here\n-----END OPENSSH PRIVATE KEY-----\n"
	hostPub  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBU9sScwddkdLvHgCn4qYcytsLm/8/Gn/jhDNSszVo+M"
)

// fullInput is a job carrying every field format ignition carries, as
// payload.Check and cloudinit.Render hand it over.
func fullInput(t *testing.T, user string) Input {
	t.Helper()
	if user == "" {
		return fullInputWith(t, "")
	}
	return fullInputWith(t, `"ignition_base64":"`+b64(user)+`"`)
}

// fullInputWith is fullInput with the user's config given by the job
// member userMember ("" for none).
func fullInputWith(t *testing.T, userMember string) Input {
	t.Helper()
	doc := `{"version":1,"format":"ignition","hostname":"node1.example.com","timezone":"Europe/Berlin",
		"users":[{"name":"alice","password_hash":"` + testenv.HashA + `","ssh_authorized_keys":["` + testenv.KeyAlice + `"],"groups":["wheel","adm"],"shell":"/bin/zsh","sudo":"ALL=(ALL) NOPASSWD:ALL"},
		         {"name":"root","password_hash":"` + testenv.HashA + `"}],
		"ssh_authorized_keys":["` + keyAdmin + `"],
		"files":[{"path":"/etc/motd","content":"Welcome\n","permissions":"0640","owner":"alice:adm"},
		         {"path":"/usr/local/bin/blob","content":"AAEC/w==","encoding":"base64","permissions":"0755"}],
		"ssh_host_keys":[{"type":"ed25519","private_key_secret":"host.key"}]`
	if userMember != "" {
		doc += "," + userMember
	}
	j, r := job.Parse([]byte(doc + "}"))
	if !r.OK() {
		t.Fatal(r.Err())
	}
	a := j.Apply(job.Defaults{})
	return Input{Job: a, PasswordHashes: []string{testenv.HashA, testenv.HashA}, HostKeys: []HostKey{{Type: "ed25519", Private: hostPriv, Public: hostPub}}}
}

func b64(s string) string {
	return strings.TrimPrefix(DataURL([]byte(s)), "data:;base64,")
}

// parseClean parses raw with Ignition's config.Parse and fails unless it
// gives no error and no report entry at all (no warning either).
func parseClean(t *testing.T, raw []byte) types.Config {
	t.Helper()
	c, rpt, err := ignconfig.Parse(raw)
	if err != nil || len(rpt.Entries) != 0 {
		t.Fatalf("Ignition's config.Parse: %v; report:\n%s\nconfig: %s", err, rpt.String(), raw)
	}
	return c
}

// render follows ignition.config.merge the way the guest's Ignition does
// (internal/exec's ConfigFetcher.RenderConfig, for data: URLs): each child
// is fetched, checked against its verification hash, parsed with
// config.Parse, rendered in turn and merged with Ignition's own Merge.
func render(t *testing.T, c types.Config) types.Config {
	t.Helper()
	merged := c
	for _, ref := range c.Ignition.Config.Merge {
		if ref.Source == nil || !strings.HasPrefix(*ref.Source, "data:") {
			t.Fatalf("merge source %v is not a data: URL", ref.Source)
		}
		du, err := dataurl.DecodeString(*ref.Source)
		if err != nil {
			t.Fatalf("decoding the merge source: %v", err)
		}
		if ref.Verification.Hash != nil {
			sum := sha512.Sum512(du.Data)
			if want := "sha512-" + hex.EncodeToString(sum[:]); *ref.Verification.Hash != want {
				t.Fatalf("verification hash %s, want %s", *ref.Verification.Hash, want)
			}
		}
		child := render(t, parseClean(t, du.Data))
		merged = latest.Merge(merged, child)
	}
	return merged
}

func contents(t *testing.T, f types.File) string {
	t.Helper()
	if f.Contents.Source == nil {
		t.Fatalf("%s has no contents", f.Path)
	}
	du, err := dataurl.DecodeString(*f.Contents.Source)
	if err != nil {
		t.Fatalf("%s: %v", f.Path, err)
	}
	return string(du.Data)
}

func fileAt(c types.Config, path string) (types.File, bool) {
	for _, f := range c.Storage.Files {
		if f.Path == path {
			return f, true
		}
	}
	return types.File{}, false
}

func userNamed(c types.Config, name string) (types.PasswdUser, bool) {
	for _, u := range c.Passwd.Users {
		if u.Name == name {
			return u, true
		}
	}
	return types.PasswdUser{}, false
}

// assertCarriesJob fails unless c, a config as the guest's Ignition applies
// it, carries every field of in's job.
func assertCarriesJob(t *testing.T, c types.Config, in Input, skip map[string]bool) {
	t.Helper()
	j := in.Job
	if !skip[job.IgnitionHostnamePath] {
		f, ok := fileAt(c, job.IgnitionHostnamePath)
		if !ok || contents(t, f) != j.Hostname+"\n" || f.Mode == nil || *f.Mode != 0o644 {
			t.Errorf("hostname: %+v", f)
		}
	}
	var link *types.Link
	for i, l := range c.Storage.Links {
		if l.Path == job.IgnitionLocaltimePath {
			link = &c.Storage.Links[i]
		}
	}
	if link == nil || link.Target == nil || *link.Target != "/usr/share/zoneinfo/"+j.Timezone {
		t.Errorf("timezone link: %+v", link)
	}
	for i, ju := range j.Users {
		u, ok := userNamed(c, ju.Name)
		if !ok {
			t.Errorf("user %s missing", ju.Name)
			continue
		}
		if !skip["passwordHash:"+ju.Name] && (u.PasswordHash == nil || *u.PasswordHash != in.PasswordHashes[i]) {
			t.Errorf("user %s password hash %v", ju.Name, u.PasswordHash)
		}
		for _, k := range ju.SSHAuthorizedKeys {
			if !containsKey(u.SSHAuthorizedKeys, k) {
				t.Errorf("user %s lacks key %s", ju.Name, k)
			}
		}
		var groups []string
		for _, g := range u.Groups {
			groups = append(groups, string(g))
		}
		if !reflect.DeepEqual(groups, ju.Groups) && !(len(groups) == 0 && len(ju.Groups) == 0) {
			t.Errorf("user %s groups %v, want %v", ju.Name, groups, ju.Groups)
		}
		if ju.Shell != "" && (u.Shell == nil || *u.Shell != ju.Shell) {
			t.Errorf("user %s shell %v", ju.Name, u.Shell)
		}
		if ju.Sudo != "" {
			f, ok := fileAt(c, job.IgnitionSudoersPath(ju.Name))
			if !ok || contents(t, f) != ju.Name+" "+ju.Sudo+"\n" || *f.Mode != 0o440 {
				t.Errorf("user %s sudo rule: %+v", ju.Name, f)
			}
		}
	}
	core, ok := userNamed(c, DefaultUser)
	for _, k := range j.SSHAuthorizedKeys {
		if !ok || !containsKey(core.SSHAuthorizedKeys, k) {
			t.Errorf("user core lacks the job's key %s", k)
		}
	}
	for _, jf := range j.Files {
		f, ok := fileAt(c, jf.Path)
		if !ok {
			t.Errorf("file %s missing", jf.Path)
			continue
		}
		want := jf.Content
		if jf.Encoding == job.EncodingBase64 {
			want = string(mustB64(t, jf.Content))
		}
		if got := contents(t, f); got != want {
			t.Errorf("file %s holds %q, want %q", jf.Path, got, want)
		}
		if jf.Permissions != "" && (f.Mode == nil || fmt.Sprintf("%04o", *f.Mode) != jf.Permissions) {
			t.Errorf("file %s mode %v, want %s", jf.Path, f.Mode, jf.Permissions)
		}
		if jf.Owner != "" {
			u, g, _ := strings.Cut(jf.Owner, ":")
			if f.User.Name == nil || *f.User.Name != u || f.Group.Name == nil || *f.Group.Name != g {
				t.Errorf("file %s owner %v:%v, want %s", jf.Path, f.User.Name, f.Group.Name, jf.Owner)
			}
		}
	}
	for _, k := range in.HostKeys {
		priv, pub := job.IgnitionHostKeyPaths(k.Type)
		fp, ok1 := fileAt(c, priv)
		fpub, ok2 := fileAt(c, pub)
		if !ok1 || !ok2 || contents(t, fp) != k.Private || contents(t, fpub) != k.Public+"\n" || *fp.Mode != 0o600 {
			t.Errorf("host key %s: %+v %+v", k.Type, fp, fpub)
		}
	}
}

func mustB64(t *testing.T, s string) []byte {
	du, err := dataurl.DecodeString("data:;base64," + s)
	if err != nil {
		t.Fatal(err)
	}
	return du.Data
}

func containsKey(keys []types.SSHAuthorizedKey, k string) bool {
	for _, x := range keys {
		if string(x) == k {
			return true
		}
	}
	return false
}

// TestGeneratedConfig: the config of a job without a user config is spec
// 3.0.0 (Ignition's exact-version v3_0.Parse reads it), parses with
// config.Parse without a warning, and carries every job field.
func TestGeneratedConfig(t *testing.T) {
	in := fullInput(t, "")
	raw, spec, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if spec.String() != "3.0.0" {
		t.Errorf("spec %s, want 3.0.0", spec)
	}
	if _, rpt, err := v30.Parse(raw); err != nil || len(rpt.Entries) != 0 {
		t.Fatalf("v3_0.Parse: %v %s", err, rpt.String())
	}
	c := parseClean(t, raw)
	if len(c.Ignition.Config.Merge) != 0 {
		t.Errorf("merges %v without a user config", c.Ignition.Config.Merge)
	}
	assertCarriesJob(t, render(t, c), in, nil)
	golden.Compare(t, filepath.Join("testdata", "full.ign"), append(indent(t, raw), '\n'), *update)
}

func indent(t *testing.T, raw []byte) []byte {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// eachTestdata runs f as a subtest for each file matching pattern, with
// the file's name and contents; it fails t when fewer than 5 match.
func eachTestdata(t *testing.T, pattern string, f func(t *testing.T, name string, data []byte)) {
	t.Helper()
	names, err := filepath.Glob(pattern)
	if err != nil || len(names) < 5 {
		t.Fatalf("%s: %v %v", pattern, names, err)
	}
	for _, name := range names {
		t.Run(filepath.Base(name), func(t *testing.T) {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			f(t, name, data)
		})
	}
}

// TestUserConfigs merges each user config in testdata/user (one per
// stable spec, in the style of Ignition's and Fedora CoreOS's
// documentation): the generated config takes the user's spec, the guest's
// merge (Ignition's own code) carries every job field, and everything the
// user's config says is in the result as the user's config says it (the
// user's config is the merge child and wins).
func TestUserConfigs(t *testing.T) {
	eachTestdata(t, filepath.Join("testdata", "user", "*.ign"), func(t *testing.T, name string, user []byte) {
		child := parseClean(t, user)
		in := fullInput(t, string(user))
		raw, spec, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			Ignition struct{ Version string } `json:"ignition"`
		}
		_ = json.Unmarshal(user, &head)
		want := semver.New(head.Ignition.Version)
		if spec != *want {
			t.Errorf("spec %s, want the user's %s", spec, want)
		}
		if !strings.Contains(string(raw), `"version":"`+want.String()+`"`) {
			t.Errorf("rendered config does not say version %s", want)
		}
		assertMerged(t, raw, in, child)
		golden.Compare(t, filepath.Join("testdata", "merged", strings.TrimSuffix(filepath.Base(name), ".ign")+".ign"), append(indent(t, raw), '\n'), *update)
	})
}

// assertMerged merges raw (the rendered config) over the guest's own as
// Ignition does and checks that the result carries every job field of in,
// except what the user's config child sets itself (a hostname file, a
// password hash: the child wins), and everything child says. It returns
// the merged config.
func assertMerged(t *testing.T, raw []byte, in Input, child types.Config) types.Config {
	t.Helper()
	merged := render(t, parseClean(t, raw))
	skip := map[string]bool{}
	if _, ok := fileAt(child, job.IgnitionHostnamePath); ok {
		skip[job.IgnitionHostnamePath] = true
	}
	for _, u := range child.Passwd.Users {
		if u.PasswordHash != nil {
			skip["passwordHash:"+u.Name] = true
		}
	}
	assertCarriesJob(t, merged, in, skip)
	assertCarriesChild(t, merged, child)
	return merged
}

// assertHas fails unless have holds an entry equal to want (named what).
func assertHas[T any](t *testing.T, have []T, want T, what string) {
	t.Helper()
	if !slices.ContainsFunc(have, func(g T) bool { return reflect.DeepEqual(g, want) }) {
		t.Errorf("%s lost", what)
	}
}

// assertCarriesChild fails unless every entry of child is in merged as
// child has it (files, directories and links by path, units by name,
// users by name for the fields child sets, kernel arguments).
func assertCarriesChild(t *testing.T, merged, child types.Config) {
	t.Helper()
	for _, f := range child.Storage.Files {
		g, ok := fileAt(merged, f.Path)
		// what the user's entry leaves out keeps the generated value
		if f.Overwrite == nil {
			g.Overwrite = nil
		}
		if f.Mode == nil {
			g.Mode = nil
		}
		if f.User == (types.NodeUser{}) {
			g.User = f.User
		}
		if f.Group == (types.NodeGroup{}) {
			g.Group = f.Group
		}
		if !ok || !reflect.DeepEqual(g, f) {
			t.Errorf("file %s: merged %+v, user's %+v", f.Path, g, f)
		}
	}
	for _, d := range child.Storage.Directories {
		assertHas(t, merged.Storage.Directories, d, "directory "+d.Path)
	}
	for _, l := range child.Storage.Links {
		assertHas(t, merged.Storage.Links, l, "link "+l.Path)
	}
	for _, u := range child.Systemd.Units {
		assertHas(t, merged.Systemd.Units, u, "unit "+u.Name)
	}
	for _, u := range child.Passwd.Users {
		g, ok := userNamed(merged, u.Name)
		if !ok {
			t.Errorf("user %s lost", u.Name)
			continue
		}
		if u.PasswordHash != nil && (g.PasswordHash == nil || *g.PasswordHash != *u.PasswordHash) {
			t.Errorf("user %s: the user's password hash did not win", u.Name)
		}
		for _, k := range u.SSHAuthorizedKeys {
			if !containsKey(g.SSHAuthorizedKeys, string(k)) {
				t.Errorf("user %s lost key %s", u.Name, k)
			}
		}
		if u.Shell != nil && (g.Shell == nil || *g.Shell != *u.Shell) {
			t.Errorf("user %s shell", u.Name)
		}
	}
	if !reflect.DeepEqual(merged.KernelArguments, child.KernelArguments) && len(child.KernelArguments.ShouldExist) > 0 {
		t.Errorf("kernel arguments %+v, user's %+v", merged.KernelArguments, child.KernelArguments)
	}
}

// TestUserWins: on a conflict the user's config (the merge child) wins,
// and SSH keys of both sides are kept.
func TestUserWins(t *testing.T) {
	user := `{"ignition":{"version":"3.6.0"},"passwd":{"users":[{"name":"core","passwordHash":"$6$x$y","sshAuthorizedKeys":["` + testenv.KeyAlice + `"]}]},
		"storage":{"files":[{"path":"/etc/hostname","overwrite":true,"contents":{"source":"data:,user-host%0A"}},{"path":"/etc/motd","overwrite":true,"contents":{"source":"data:,user%20motd%0A"}}]}}`
	in := fullInput(t, user)
	raw, _, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	merged := render(t, parseClean(t, raw))
	if f, _ := fileAt(merged, "/etc/hostname"); contents(t, f) != "user-host\n" {
		t.Errorf("hostname %q: the user's config did not win", contents(t, f))
	}
	f, _ := fileAt(merged, "/etc/motd")
	if contents(t, f) != "user motd\n" {
		t.Errorf("motd %q: the user's config did not win", contents(t, f))
	}
	if f.Mode == nil || *f.Mode != 0o640 || *f.User.Name != "alice" {
		t.Errorf("motd: what the user's config leaves out comes from the job: %+v", f)
	}
	core, _ := userNamed(merged, "core")
	if *core.PasswordHash != "$6$x$y" || !containsKey(core.SSHAuthorizedKeys, keyAdmin) || !containsKey(core.SSHAuthorizedKeys, testenv.KeyAlice) {
		t.Errorf("core: %+v", core)
	}
}

// TestTopLevelKeysJoinCore: the job-wide ssh_authorized_keys go to the
// default user core, joining a users[] entry named core.
func TestTopLevelKeysJoinCore(t *testing.T) {
	j := job.Job{Version: 1, Format: job.FormatIgnition, SSHAuthorizedKeys: []string{keyAdmin, testenv.KeyAlice},
		Users: []job.User{{Name: "core", SSHAuthorizedKeys: []string{testenv.KeyAlice}, Groups: []string{"wheel"}}}}
	c := Generate(Input{Job: j})
	if len(c.Passwd.Users) != 1 {
		t.Fatalf("users %+v", c.Passwd.Users)
	}
	u := c.Passwd.Users[0]
	if u.Name != "core" || len(u.SSHAuthorizedKeys) != 2 || string(u.SSHAuthorizedKeys[0]) != testenv.KeyAlice || string(u.SSHAuthorizedKeys[1]) != keyAdmin {
		t.Errorf("core %+v", u)
	}
}

// TestSpec2UserConfig (issue 41): a user's spec 2.3.0 config written as
// ct writes it is converted as Flatcar's Ignition converts it (spec
// 3.1.0, package ignconvert), the generated config declares spec 3.1.0,
// and the guest's merge (config.Parse of each config, Ignition's Merge)
// carries both the job's fields and every entry of the converted config.
func TestSpec2UserConfig(t *testing.T) {
	user, err := os.ReadFile(filepath.Join("testdata", "ct-2.3.ign"))
	if err != nil {
		t.Fatal(err)
	}
	in := fullInput(t, string(user))
	raw, spec, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if spec.String() != "3.1.0" || !strings.Contains(string(raw), `"version":"3.1.0"`) {
		t.Errorf("spec %s:\n%s", spec, raw)
	}
	converted, _, err := job.IgnitionUserConfig(&in.Job)
	if err != nil {
		t.Fatal(err)
	}
	child := parseClean(t, converted)
	merged := render(t, parseClean(t, raw))
	assertCarriesJob(t, merged, in, map[string]bool{})
	assertCarriesChild(t, merged, child)
	if g, ok := fileAt(merged, "/etc/issue.d/50-ct.issue"); !ok || *g.Contents.Source != "data:,written%20by%20ct%0A" {
		t.Errorf("the ct config's file is not in the merged config: %+v", g)
	}
}
