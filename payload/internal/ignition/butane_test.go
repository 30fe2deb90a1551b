package ignition

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_7_experimental/types"
	"github.com/vincent-petithory/dataurl"
	"go.yaml.in/yaml/v3"

	"github.com/vmpayload/vmpayload/payload/internal/butane"
	"github.com/vmpayload/vmpayload/test/golden"
)

// buConfig is what the Butane configs in testdata/butane say, read with a
// YAML decoder: the test's statement of what the guest must get, compared
// with the config Ignition's own parse and merge make of the rendered
// config.
type buConfig struct {
	Passwd struct {
		Users []struct {
			Name              string
			PasswordHash      string   `yaml:"password_hash"`
			SSHAuthorizedKeys []string `yaml:"ssh_authorized_keys"`
			Groups            []string
			Shell             string
			HomeDir           string `yaml:"home_dir"`
		}
		Groups []struct {
			Name string
			Gid  *int
		}
	}
	Storage struct {
		Directories []struct {
			Path        string
			Mode        *int
			User, Group struct{ Name string }
		}
		Files []struct {
			Path        string
			Mode        *int
			Overwrite   *bool
			User, Group struct{ Name string }
			Contents    struct{ Inline string }
			Append      []struct{ Inline string }
		}
		Links []struct {
			Path, Target string
			Hard         bool
			Overwrite    *bool
		}
	}
	Systemd struct {
		Units []struct {
			Name     string
			Enabled  *bool
			Mask     bool
			Contents string
			Dropins  []struct{ Name, Contents string }
		}
	}
	KernelArguments struct {
		ShouldExist    []string `yaml:"should_exist"`
		ShouldNotExist []string `yaml:"should_not_exist"`
	} `yaml:"kernel_arguments"`
}

// resourceText is the text of an Ignition resource as the guest writes
// it: its data: URL decoded and, when Butane compressed it, gunzipped.
func resourceText(t *testing.T, what string, r types.Resource) string {
	t.Helper()
	if r.Source == nil {
		t.Fatalf("%s has no source", what)
	}
	du, err := dataurl.DecodeString(*r.Source)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if r.Compression == nil || *r.Compression == "" {
		return string(du.Data)
	}
	if *r.Compression != "gzip" {
		t.Fatalf("%s: compression %q", what, *r.Compression)
	}
	zr, err := gzip.NewReader(bytes.NewReader(du.Data))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return string(b)
}

func eqPtr[T comparable](p *T, v T) bool { return p != nil && *p == v }

// TestButaneConfigs renders a job carrying every Ignition field with each
// Butane config in testdata/butane (in the style of Fedora CoreOS's and
// Flatcar's documentation) as its butane field: the Butane config is
// translated with Butane's library, the rendered config declares the spec
// Butane's version produces, Ignition's config.Parse reads it and the
// merged config without an error or warning, and the guest's merge
// (Ignition's own code) carries every job field and everything the Butane
// config says: users with keys, password hash, groups, shell and home;
// groups; directories, files (inline and appended contents, mode, owner,
// overwrite) and links; units with contents, enablement, masks and
// drop-ins; kernel arguments. The rendered config is compared with the
// golden testdata/butane/NAME.ign (go test -update rewrites it).
func TestButaneConfigs(t *testing.T) {
	eachTestdata(t, filepath.Join("testdata", "butane", "*.bu"), func(t *testing.T, name string, src []byte) {
		var want buConfig
		if err := yaml.Unmarshal(src, &want); err != nil {
			t.Fatal(err)
		}
		translated, spec, problems := butane.Translate(src)
		if len(problems) > 0 {
			t.Fatalf("Butane: %v", problems)
		}
		child := parseClean(t, translated)
		member, _ := json.Marshal(string(src))
		in := fullInputWith(t, `"butane":`+string(member))
		raw, gotSpec, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		if gotSpec.String() != spec {
			t.Errorf("spec %s, want %s (what Butane's version produces)", gotSpec, spec)
		}
		merged := assertMerged(t, raw, in, child)
		assertCarriesButane(t, merged, want)
		golden.Compare(t, filepath.Join("testdata", "butane", strings.TrimSuffix(filepath.Base(name), ".bu")+".ign"), append(indent(t, raw), '\n'), *update)
	})
}

// assertCarriesButane fails unless c, a merged config as the guest's
// Ignition applies it, carries everything the Butane config want says.
func assertCarriesButane(t *testing.T, c types.Config, want buConfig) {
	t.Helper()
	for _, wu := range want.Passwd.Users {
		u, ok := userNamed(c, wu.Name)
		if !ok {
			t.Errorf("user %s missing", wu.Name)
			continue
		}
		if wu.PasswordHash != "" && !eqPtr(u.PasswordHash, wu.PasswordHash) {
			t.Errorf("user %s password hash %v, want %s", wu.Name, u.PasswordHash, wu.PasswordHash)
		}
		for _, k := range wu.SSHAuthorizedKeys {
			if !containsKey(u.SSHAuthorizedKeys, k) {
				t.Errorf("user %s lacks key %s", wu.Name, k)
			}
		}
		for _, g := range wu.Groups {
			if !slices.Contains(u.Groups, types.Group(g)) {
				t.Errorf("user %s lacks group %s", wu.Name, g)
			}
		}
		if wu.Shell != "" && !eqPtr(u.Shell, wu.Shell) {
			t.Errorf("user %s shell %v, want %s", wu.Name, u.Shell, wu.Shell)
		}
		if wu.HomeDir != "" && !eqPtr(u.HomeDir, wu.HomeDir) {
			t.Errorf("user %s home %v, want %s", wu.Name, u.HomeDir, wu.HomeDir)
		}
	}
	for _, wg := range want.Passwd.Groups {
		found := false
		for _, g := range c.Passwd.Groups {
			found = found || g.Name == wg.Name && reflect.DeepEqual(g.Gid, wg.Gid)
		}
		if !found {
			t.Errorf("group %s (gid %v) missing", wg.Name, wg.Gid)
		}
	}
	for _, wd := range want.Storage.Directories {
		var d *types.Directory
		for i := range c.Storage.Directories {
			if c.Storage.Directories[i].Path == wd.Path {
				d = &c.Storage.Directories[i]
			}
		}
		if d == nil || !reflect.DeepEqual(d.Mode, wd.Mode) ||
			wd.User.Name != "" && !eqPtr(d.User.Name, wd.User.Name) || wd.Group.Name != "" && !eqPtr(d.Group.Name, wd.Group.Name) {
			t.Errorf("directory %s: %+v", wd.Path, d)
		}
	}
	for _, wf := range want.Storage.Files {
		f, ok := fileAt(c, wf.Path)
		if !ok {
			t.Errorf("file %s missing", wf.Path)
			continue
		}
		if wf.Mode != nil && !reflect.DeepEqual(f.Mode, wf.Mode) {
			t.Errorf("file %s mode %v, want %o", wf.Path, f.Mode, *wf.Mode)
		}
		if wf.Overwrite != nil && !reflect.DeepEqual(f.Overwrite, wf.Overwrite) {
			t.Errorf("file %s overwrite %v, want %v", wf.Path, f.Overwrite, *wf.Overwrite)
		}
		if wf.User.Name != "" && !eqPtr(f.User.Name, wf.User.Name) || wf.Group.Name != "" && !eqPtr(f.Group.Name, wf.Group.Name) {
			t.Errorf("file %s owner %v:%v, want %s:%s", wf.Path, f.User.Name, f.Group.Name, wf.User.Name, wf.Group.Name)
		}
		if wf.Contents.Inline != "" {
			if got := resourceText(t, wf.Path, f.Contents); got != wf.Contents.Inline {
				t.Errorf("file %s holds %q, want %q", wf.Path, got, wf.Contents.Inline)
			}
		}
		if len(f.Append) != len(wf.Append) {
			t.Errorf("file %s appends %d, want %d", wf.Path, len(f.Append), len(wf.Append))
			continue
		}
		for i, a := range wf.Append {
			if got := resourceText(t, wf.Path, f.Append[i]); got != a.Inline {
				t.Errorf("file %s append %d holds %q, want %q", wf.Path, i, got, a.Inline)
			}
		}
	}
	for _, wl := range want.Storage.Links {
		var l *types.Link
		for i := range c.Storage.Links {
			if c.Storage.Links[i].Path == wl.Path {
				l = &c.Storage.Links[i]
			}
		}
		if l == nil || !eqPtr(l.Target, wl.Target) || (l.Hard != nil && *l.Hard) != wl.Hard ||
			wl.Overwrite != nil && !reflect.DeepEqual(l.Overwrite, wl.Overwrite) {
			t.Errorf("link %s: %+v", wl.Path, l)
		}
	}
	for _, wu := range want.Systemd.Units {
		var u *types.Unit
		for i := range c.Systemd.Units {
			if c.Systemd.Units[i].Name == wu.Name {
				u = &c.Systemd.Units[i]
			}
		}
		if u == nil {
			t.Errorf("unit %s missing", wu.Name)
			continue
		}
		if !reflect.DeepEqual(u.Enabled, wu.Enabled) || (u.Mask != nil && *u.Mask) != wu.Mask ||
			wu.Contents != "" && !eqPtr(u.Contents, wu.Contents) {
			t.Errorf("unit %s: %+v", wu.Name, u)
		}
		for _, wd := range wu.Dropins {
			found := false
			for _, d := range u.Dropins {
				found = found || d.Name == wd.Name && eqPtr(d.Contents, wd.Contents)
			}
			if !found {
				t.Errorf("unit %s lacks drop-in %s", wu.Name, wd.Name)
			}
		}
	}
	for _, k := range want.KernelArguments.ShouldExist {
		if !slices.Contains(c.KernelArguments.ShouldExist, types.KernelArgument(k)) {
			t.Errorf("kernel argument %s missing", k)
		}
	}
	for _, k := range want.KernelArguments.ShouldNotExist {
		if !slices.Contains(c.KernelArguments.ShouldNotExist, types.KernelArgument(k)) {
			t.Errorf("kernel argument %s not removed", k)
		}
	}
}
