package judge

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// builder makes an image from testdata with real tools and returns its path.
type builder func(t *testing.T, dir string) string

func testdata(t *testing.T, parts ...string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatalf("resolving testdata path: %v", err)
	}
	return p
}

func mustRun(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("test needs %s (apt-get install cloud-image-utils genisoimage dosfstools mtools cloud-init): %v", name, err)
	}
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// seedDir copies the named testdata files (as dest=src pairs) into a fresh dir.
func seedDir(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	d := filepath.Join(dir, "seed")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for dst, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatalf("reading fixture: %v", err)
		}
		if err := os.WriteFile(filepath.Join(d, dst), b, 0o644); err != nil {
			t.Fatalf("writing seed file: %v", err)
		}
	}
	return d
}

func genisoimage(label string, src func(t *testing.T, dir string) string) builder {
	return func(t *testing.T, dir string) string {
		out := filepath.Join(dir, "seed.iso")
		mustRun(t, "genisoimage", "-quiet", "-J", "-r", "-V", label, "-o", out, src(t, dir))
		return out
	}
}

// nocloudWith is a NoCloud seed ISO (label cidata) of the nocloud user-data
// and meta-data and one more file: name from testdata path.
func nocloudWith(name, path string) builder {
	return genisoimage("cidata", files(map[string]string{
		"user-data": "nocloud/user-data", "meta-data": "nocloud/meta-data", name: path}))
}

func localds(vfat bool) builder {
	return func(t *testing.T, dir string) string {
		out := filepath.Join(dir, "seed.img")
		args := []string{}
		if vfat {
			args = append(args, "-f", "vfat")
		}
		args = append(args, "-N", testdata(t, "nocloud", "network-config"), out,
			testdata(t, "nocloud", "user-data"), testdata(t, "nocloud", "meta-data"))
		mustRun(t, "cloud-localds", args...)
		return out
	}
}

func files(m map[string]string) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		abs := map[string]string{}
		for k, v := range m {
			abs[k] = testdata(t, strings.Split(v, "/")...)
		}
		return seedDir(t, dir, abs)
	}
}

func tree(name string) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string { return testdata(t, name) }
}

func multipart(t *testing.T, dir string) string {
	mp := mustRun(t, "cloud-init", "devel", "make-mime",
		"-a", testdata(t, "multipart", "first.yaml")+":cloud-config",
		"-a", testdata(t, "multipart", "second.yaml")+":cloud-config",
		"-a", testdata(t, "multipart", "append.yaml")+":cloud-config",
		"-a", testdata(t, "multipart", "script.sh")+":x-shellscript")
	d := seedDir(t, dir, map[string]string{"meta-data": testdata(t, "multipart", "meta-data")})
	if err := os.WriteFile(filepath.Join(d, "user-data"), mp, 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// vfatImage makes a 1 MiB vfat image labelled label holding the named
// testdata paths (files or directories) at its root.
func vfatImage(label string, paths ...string) builder {
	return func(t *testing.T, dir string) string {
		out := filepath.Join(dir, "seed.vfat")
		mustRun(t, "mkfs.vfat", "-C", "-n", label, out, "1024")
		args := []string{"-s", "-i", out}
		for _, p := range paths {
			args = append(args, testdata(t, strings.Split(p, "/")...))
		}
		mustRun(t, "mcopy", append(args, "::")...)
		return out
	}
}

func hasSubstring(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestJudge(t *testing.T) {
	ctx := context.Background()
	if err := CheckEnvironment(ctx); err != nil {
		t.Fatalf("judge cannot run here: %v", err)
	}
	nocloudGood := func(t *testing.T, r *Report) {
		if r.InstanceID != "iid-judge-0001" || r.Hostname != "judge-vm" {
			t.Errorf("instance-id/hostname = %q/%q", r.InstanceID, r.Hostname)
		}
		wantKeys := []string{
			"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey1 one@example",
			"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey2 two@example",
		}
		if !reflect.DeepEqual(r.PublicKeys, wantKeys) {
			t.Errorf("public keys = %q, want %q", r.PublicKeys, wantKeys)
		}
		if !reflect.DeepEqual(r.Files, []string{"meta-data", "network-config", "user-data"}) {
			t.Errorf("files = %q", r.Files)
		}
		cc := r.MergedCloudConfig
		if cc["hostname"] != "judge-vm" {
			t.Errorf("merged hostname = %v", cc["hostname"])
		}
		// write_files as the module decodes it (encoding: b64)
		if wf := r.UserData.WriteFiles; len(wf) != 1 || wf[0].Path != "/etc/vmpayload-judge" || string(wf[0].Content) != "hello\n" || wf[0].Defer {
			t.Errorf("write_files = %+v", wf)
		}
		users, _ := cc["users"].([]any)
		if len(users) != 1 {
			t.Fatalf("users = %v", cc["users"])
		}
		u, _ := users[0].(map[string]any)
		ok, err := HashVerifies(u["passwd"].(string), "correct horse")
		if err != nil || !ok {
			t.Errorf("passwd hash does not verify: %v %v", ok, err)
		}
		ifc, _ := r.NetworkState["interfaces"].(map[string]any)
		if _, ok := ifc["eth0"]; !ok {
			t.Errorf("network state has no eth0: %v", r.NetworkState)
		}
		for _, kind := range []string{"eni", "netplan", "networkd"} {
			joined := ""
			for _, c := range r.RenderedNetwork[kind] {
				joined += c
			}
			if !strings.Contains(joined, "192.0.2.10") {
				t.Errorf("%s rendering lacks 192.0.2.10: %v", kind, r.RenderedNetwork[kind])
			}
		}
	}
	cases := []struct {
		name       string
		build      builder
		fsType     string
		datasource string
		validSeed  bool
		ok         bool   // no complaint at all
		errSub     string // substring expected in AllErrors
		check      func(t *testing.T, r *Report)
	}{
		{name: "cloud-localds iso", build: localds(false), fsType: "iso9660", datasource: NoCloud,
			validSeed: true, ok: true, check: nocloudGood},
		{name: "cloud-localds vfat", build: localds(true), fsType: "vfat", datasource: NoCloud,
			validSeed: true, ok: true, check: nocloudGood},
		{name: "config-2 genisoimage", build: genisoimage("config-2", tree("configdrive")), fsType: "iso9660",
			datasource: ConfigDrive, validSeed: true, ok: true,
			check: func(t *testing.T, r *Report) {
				if r.InstanceID != "6f1c2c43-0d6e-4d0e-9a57-3f4f7b0d2a11" || r.Hostname != "judge-cd.example.org" {
					t.Errorf("instance-id/hostname = %q/%q", r.InstanceID, r.Hostname)
				}
				if !reflect.DeepEqual(r.PublicKeys, []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICd cd@example"}) {
					t.Errorf("public keys = %q", r.PublicKeys)
				}
				if got := r.InjectedFiles["/etc/vmpayload/injected.conf"]; got != "injected=yes\n" {
					t.Errorf("injected file = %q", got)
				}
				if _, ok := r.MergedCloudConfig["runcmd"]; !ok {
					t.Errorf("user_data runcmd missing: %v", r.MergedCloudConfig)
				}
				if !strings.Contains(r.RenderedNetwork["eni"]["etc/network/interfaces.d/50-cloud-init"], "address 198.51.100.7/24") {
					t.Errorf("eni rendering = %v", r.RenderedNetwork["eni"])
				}
				if r.VendorData == nil || r.VendorData.MergedCloudConfig["timezone"] != "Etc/UTC" {
					t.Errorf("vendor-data = %+v", r.VendorData)
				}
				if r.AssumedMACs["52:54:00:ab:cd:01"] != "eth0" {
					t.Errorf("assumed macs = %v", r.AssumedMACs)
				}
			}},
		{name: "missing meta-data", fsType: "iso9660", datasource: NoCloud, validSeed: false,
			build:  genisoimage("cidata", files(map[string]string{"user-data": "nocloud/user-data"})),
			errSub: "Missing required files: meta-data"},
		{name: "iso without rock ridge or joliet", fsType: "iso9660", datasource: NoCloud, validSeed: false,
			build: func(t *testing.T, dir string) string {
				src := files(map[string]string{"user-data": "nocloud/user-data", "meta-data": "nocloud/meta-data"})(t, dir)
				out := filepath.Join(dir, "plain.iso")
				mustRun(t, "genisoimage", "-quiet", "-V", "cidata", "-o", out, src)
				return out
			},
			errSub: "Missing required files: user-data,meta-data"},
		{name: "schema failure users: 3", fsType: "iso9660", datasource: NoCloud, validSeed: true,
			build: genisoimage("cidata", files(map[string]string{
				"user-data": "bad-schema/user-data", "meta-data": "nocloud/meta-data"})),
			errSub: "users: 3 is not of type",
			check: func(t *testing.T, r *Report) {
				if len(r.SchemaErrors) != 1 {
					t.Errorf("schema errors = %q", r.SchemaErrors)
				}
			}},
		{name: "deprecated keys pass but are reported", fsType: "iso9660", datasource: NoCloud, validSeed: true, ok: true,
			build: genisoimage("cidata", files(map[string]string{
				"user-data": "deprecated/user-data", "meta-data": "nocloud/meta-data"})),
			check: func(t *testing.T, r *Report) {
				d := r.Deprecations
				if !hasSubstring(d, "users.0.sudo") || !hasSubstring(d, "users.0.lock-passwd") {
					t.Errorf("deprecations = %q", d)
				}
			}},
		{name: "network-config version 3", fsType: "iso9660", datasource: NoCloud, validSeed: true,
			build:  nocloudWith("network-config", "netv3/network-config"),
			errSub: "No valid network_state",
			check: func(t *testing.T, r *Report) {
				if r.NetworkState != nil || len(r.RenderedNetwork) != 0 {
					t.Errorf("v3 network config rendered: %v %v", r.NetworkState, r.RenderedNetwork)
				}
			}},
		{name: "22.4 rejects to: default routes", fsType: "iso9660", datasource: NoCloud, validSeed: true,
			build:  nocloudWith("network-config", "route-default/network-config"),
			errSub: "Address default is not a valid ip address"},
		{name: "network: wrapper is not unwrapped by NoCloud", fsType: "iso9660", datasource: NoCloud, validSeed: true,
			build:  nocloudWith("network-config", "net-wrapper/network-config"),
			errSub: "top-level 'network:' wrapper",
			check: func(t *testing.T, r *Report) {
				if r.NetworkState != nil {
					t.Errorf("wrapped config produced a network state: %v", r.NetworkState)
				}
			}},
		{name: "config-2 random seed, cloud-config and meta_data.json", build: genisoimage("config-2", tree("configdrive-seed")),
			fsType: "iso9660", datasource: ConfigDrive, validSeed: true, ok: true,
			check: func(t *testing.T, r *Report) {
				// seed_random writes the cloud-config data first, then the
				// datasource's seed
				got, err := base64.StdEncoding.DecodeString(r.RandomSeed)
				if err != nil || string(got) != "cloud-config-seedmetadata-seed" {
					t.Errorf("random seed %q (%q, %v)", r.RandomSeed, got, err)
				}
			}},
		{name: "config-2 random_seed not base64", build: genisoimage("config-2", tree("configdrive-badseed")),
			fsType: "iso9660", datasource: ConfigDrive, validSeed: false, errSub: "random_seed"},
		{name: "config-2 without uuid", build: genisoimage("config-2", tree("configdrive-nouuid")),
			fsType: "iso9660", datasource: ConfigDrive, validSeed: false, errSub: "No 'uuid' entry"},
		{name: "vfat with wrong label", build: vfatImage("WRONG", "nocloud/user-data", "nocloud/meta-data"), fsType: "vfat", datasource: "",
			validSeed: false, errSub: "not a cloud-init seed"},
		{name: "vfat CIDATA made by mkfs.vfat", build: vfatImage("CIDATA", "nocloud/user-data", "nocloud/meta-data"),
			fsType: "vfat", datasource: NoCloud, validSeed: true, ok: true,
			check: func(t *testing.T, r *Report) {
				if r.Label != "CIDATA" || !reflect.DeepEqual(r.Files, []string{"meta-data", "user-data"}) {
					t.Errorf("label %q files %q", r.Label, r.Files)
				}
			}},
		{name: "vfat config-2", build: vfatImage("config-2", "configdrive/openstack"), fsType: "vfat",
			datasource: ConfigDrive, validSeed: true, ok: true,
			check: func(t *testing.T, r *Report) {
				if r.InstanceID != "6f1c2c43-0d6e-4d0e-9a57-3f4f7b0d2a11" {
					t.Errorf("instance-id = %q", r.InstanceID)
				}
			}},
		{name: "include urls recorded not fetched", fsType: "iso9660", datasource: NoCloud, validSeed: true, ok: true,
			build: genisoimage("cidata", files(map[string]string{
				"user-data": "include/user-data", "meta-data": "multipart/meta-data"})),
			check: func(t *testing.T, r *Report) {
				want := []string{"http://example.invalid/a.yaml", "https://example.invalid/b"}
				if !reflect.DeepEqual(r.UserData.Includes, want) || r.MergedCloudConfig != nil {
					t.Errorf("includes = %q merged = %v", r.UserData.Includes, r.MergedCloudConfig)
				}
			}},
		{name: "plain text user-data is ignored by cloud-init", fsType: "iso9660", datasource: NoCloud, validSeed: true,
			build: genisoimage("cidata", files(map[string]string{
				"user-data": "plaintext/user-data", "meta-data": "multipart/meta-data"})),
			errSub: "Unhandled non-multipart",
			check: func(t *testing.T, r *Report) {
				if len(r.UserData.Unknown) != 1 || r.MergedCloudConfig != nil {
					t.Errorf("unknown = %v merged = %v", r.UserData.Unknown, r.MergedCloudConfig)
				}
			}},
		{name: "config-2 link without name or mac", build: genisoimage("config-2", tree("configdrive-badlink")),
			fsType: "iso9660", datasource: ConfigDrive, validSeed: true, errSub: "No mac_address or name entry",
			check: func(t *testing.T, r *Report) {
				if r.NetworkConfig != nil || r.InstanceID != "0b9f2b0e-5c55-4b8e-9d55-6f1f0c7a9e01" {
					t.Errorf("network config %v, instance-id %q", r.NetworkConfig, r.InstanceID)
				}
			}},
		{name: "nocloud vendor-data script", fsType: "iso9660", datasource: NoCloud, validSeed: true, ok: true,
			build: nocloudWith("vendor-data", "vendor/vendor-data"),
			check: func(t *testing.T, r *Report) {
				if r.VendorData == nil || len(r.VendorData.Scripts) != 1 ||
					!strings.Contains(r.VendorData.Scripts[0].Content, "echo vendor") {
					t.Errorf("vendor-data = %+v", r.VendorData)
				}
				if len(r.Scripts) != 0 {
					t.Errorf("user-data scripts = %v", r.Scripts)
				}
			}},
		{name: "multipart merge", build: genisoimage("cidata", multipart), fsType: "iso9660",
			datasource: NoCloud, validSeed: true, ok: true,
			check: func(t *testing.T, r *Report) {
				// Default mergers dict(replace)+list()+str(): the second part
				// replaces hostname and packages; the third part's merge_how
				// (list append, dict no_replace) appends and keeps hostname.
				want := map[string]any{
					"hostname": "second",
					"packages": []any{"jq", "htop"},
					"runcmd":   []any{"echo first"},
					"bootcmd":  []any{"echo second"},
				}
				if got := r.MergedCloudConfig; !reflect.DeepEqual(got, want) {
					t.Errorf("merged = %#v\nwant %#v", got, want)
				}
				if len(r.Parts) != 4 || len(r.Scripts) != 1 ||
					!strings.Contains(r.Scripts[0].Content, "judge-script") {
					t.Errorf("parts = %d, scripts = %v", len(r.Parts), r.Scripts)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			img := tc.build(t, t.TempDir())
			r, err := Judge(ctx, img)
			if err != nil {
				t.Fatalf("Judge: %v", err)
			}
			if r.FSType != tc.fsType || r.Datasource != tc.datasource || r.ValidSeed != tc.validSeed {
				t.Errorf("fs/datasource/valid = %q/%q/%v, want %q/%q/%v (errors %q)",
					r.FSType, r.Datasource, r.ValidSeed, tc.fsType, tc.datasource, tc.validSeed, r.AllErrors())
			}
			if r.OK() != tc.ok {
				t.Errorf("OK() = %v, want %v; errors: %q", r.OK(), tc.ok, r.AllErrors())
			}
			if tc.errSub != "" && !hasSubstring(r.AllErrors(), tc.errSub) {
				t.Errorf("errors %q lack %q", r.AllErrors(), tc.errSub)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestHashVerifies(t *testing.T) {
	const good = "$6$judgesalt$BthhjKGzH9mW8mpIHjO2.Ndd9nC.Jc.ZXcpfq1o4Cq7WSuU.yeoX8SgLgyQjJJLdTRj23hUvohgsyXMIc6n1e0"
	rounds := strings.TrimSpace(string(mustRun(t, Python, "-W", "ignore", "-c",
		"import crypt; print(crypt.crypt('s3cret', '$6$rounds=5000$abcdefgh'))")))
	cases := []struct {
		name, hash, plain string
		want              bool
		wantErr           bool
	}{
		{name: "match", hash: good, plain: "correct horse", want: true},
		{name: "wrong password", hash: good, plain: "correct horsE", want: false},
		{name: "rounds match", hash: rounds, plain: "s3cret", want: true},
		{name: "rounds mismatch", hash: rounds, plain: "s3cret!", want: false},
		{name: "md5 crypt is not sha512", hash: "$1$abc$def", plain: "x", wantErr: true},
		{name: "garbage", hash: "plaintext", plain: "plaintext", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HashVerifies(tc.hash, tc.plain)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("HashVerifies = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckEnvironmentNamesMissingTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := CheckEnvironment(context.Background())
	if err == nil {
		t.Fatal("CheckEnvironment succeeded with an empty PATH")
	}
	for _, tool := range []string{"blkid", "xorriso", "mcopy"} {
		if !strings.Contains(err.Error(), tool) {
			t.Errorf("error %q does not name %s", err, tool)
		}
	}
	if _, err := Judge(context.Background(), "nonexistent.img"); err == nil {
		t.Error("Judge succeeded with an empty PATH")
	}
}

func TestCheckEnvironmentWithoutCloudinit(t *testing.T) {
	// A Python that cannot see dist-packages (-S) stands in for a machine
	// whose /usr/bin/python3 lacks Debian's cloud-init.
	wrapper := filepath.Join(t.TempDir(), "python-without-cloudinit")
	script := "#!/bin/sh\nexec " + Python + " -S \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := python
	python = wrapper
	t.Cleanup(func() { python = saved })
	err := CheckEnvironment(context.Background())
	if err == nil {
		t.Fatal("CheckEnvironment succeeded with a Python lacking cloudinit")
	}
	if !strings.Contains(err.Error(), "cannot import cloudinit") {
		t.Errorf("error %q does not say cloudinit is missing", err)
	}
}
