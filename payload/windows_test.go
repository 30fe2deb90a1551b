package payload_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// Windows guests (issue 35): the example jobs of configs/examples/windows
// are rendered to golden files and read by cloudbase-init's own code
// (test/cloudbaseinit/read_payload.py) from the image as Windows sees it.

const windowsExamplesDir = "../configs/examples/windows"

// CloudbaseInitEnv names the cloudbase-init checkout the judge imports.
const CloudbaseInitEnv = "VMPAYLOAD_CLOUDBASE_INIT"

func windowsExamples(t *testing.T) []example {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(windowsExamplesDir, "*.json"))
	if err != nil || len(paths) < 5 {
		t.Fatalf("want at least 5 Windows example jobs in %s, found %d (%v)", windowsExamplesDir, len(paths), err)
	}
	var out []example
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		j, rep := job.Parse(data)
		if !rep.OK() {
			t.Fatalf("%s: %v", p, rep.Err())
		}
		if j.Format != "" && j.Format != job.FormatNoCloud && j.Format != job.FormatConfigDrive {
			continue // the sysprep examples (sysprep_test.go): no cloudbase-init
		}
		if !j.IsWindows() {
			t.Fatalf("%s is not a guest_os \"windows\" job", p)
		}
		out = append(out, example{strings.TrimSuffix(filepath.Base(p), ".json"), j})
	}
	if len(out) < 5 {
		t.Fatalf("want at least 5 config-drive or NoCloud Windows example jobs in %s, found %d", windowsExamplesDir, len(out))
	}
	return out
}

// TestWindowsGolden: the documents of every Windows example are their
// golden files (testdata/golden/windows; -update rewrites them).
func TestWindowsGolden(t *testing.T) {
	for _, ex := range windowsExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			r, err := payloadtest.Render(ex.job, secretsDir, payload.Options{})
			if err != nil {
				t.Fatal(err)
			}
			assertGoldenDocs(t, filepath.Join("testdata", "golden", "windows", ex.name), r)
		})
	}
}

// adminPassword returns the plaintext the example's admin_password_secret
// holds, as the agent reads it ("" without one).
func adminPassword(t *testing.T, j *job.Job) string {
	t.Helper()
	if j.AdminPasswordSecret == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(secretsDir, j.AdminPasswordSecret))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimRight(string(b), "\r\n")
}

// TestWindowsSecretsStayInTheImage: the administrator password reaches
// meta_data.json and nothing else a build produces: not the result, not
// the recipe (which keeps the secret's name) nor its XML, not the image
// name; and the recipe rebuilds the image byte for byte through the
// secrets directory, as the hook does.
func TestWindowsSecretsStayInTheImage(t *testing.T) {
	ctx := context.Background()
	for _, ex := range windowsExamples(t) {
		pw := adminPassword(t, ex.job)
		if pw == "" {
			continue
		}
		t.Run(ex.name, func(t *testing.T) {
			dir := t.TempDir()
			payDir := filepath.Join(dir, "payload")
			if err := os.Mkdir(payDir, 0o711); err != nil {
				t.Fatal(err)
			}
			r, err := payloadtest.Render(ex.job, secretsDir, payload.Options{})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(payDir, r.ImageName("win"))
			res, err := r.Write(ctx, out, payload.Options{GID: -1, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			var inImage bool
			for _, f := range r.Docs.Files {
				inImage = inImage || bytes.Contains(f.Data, []byte(pw))
			}
			if !inImage {
				t.Errorf("the administrator password is not in the documents")
			}
			rc, err := recipe.New(r, res)
			if err != nil {
				t.Fatal(err)
			}
			keys, err := seal.LoadOrCreate(recipe.KeyFile(secretsDir))
			if err != nil {
				t.Fatal(err)
			}
			elem, err := rc.Element(keys)
			if err != nil {
				t.Fatal(err)
			}
			xmlText := []byte("<domain><name>win</name><metadata>" + elem + "</metadata></domain>")
			resJSON, _ := json.Marshal(res)
			for what, b := range map[string][]byte{"result": resJSON, "recipe XML": xmlText, "image name": []byte(out)} {
				if bytes.Contains(b, []byte(pw)) {
					t.Errorf("the administrator password is in the %s", what)
				}
			}
			if rc.Job.AdminPasswordSecret != ex.job.AdminPasswordSecret {
				t.Errorf("the recipe names secret %q, want %q", rc.Job.AdminPasswordSecret, ex.job.AdminPasswordSecret)
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(out)
			back, ok, err := recipe.FromDomainXML(string(xmlText))
			if err != nil || !ok {
				t.Fatalf("reading the recipe back: %v %v", ok, err)
			}
			got, err := recipe.Rebuild(ctx, back, recipe.RebuildOptions{PayloadDir: payDir, SecretsDir: secretsDir, GID: -1})
			if err != nil || got != recipe.OutcomeRebuilt {
				t.Fatalf("rebuild: %v %v", got, err)
			}
			if b, err := os.ReadFile(out); err != nil || !bytes.Equal(b, want) {
				t.Errorf("the rebuilt image differs (%v)", err)
			}
			// another password in the secret: the rebuild refuses, naming
			// the secret, not its content
			other := filepath.Join(dir, "secrets")
			copyDir(t, secretsDir, other)
			if err := os.WriteFile(filepath.Join(other, ex.job.AdminPasswordSecret), []byte("Another!Passw0rd\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(out)
			_, err = recipe.Rebuild(ctx, back, recipe.RebuildOptions{PayloadDir: payDir, SecretsDir: other, GID: -1})
			if err == nil || !strings.Contains(err.Error(), "admin_password_secret") || strings.Contains(err.Error(), "Another!Passw0rd") || strings.Contains(err.Error(), pw) {
				t.Errorf("rebuild with a changed secret: %v", err)
			}
		})
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// windowsTree extracts the payload image img into dir as Windows reads it
// and says how: an ISO through its Joliet tree only (isoinfo -J: the names
// Windows' CD-ROM driver shows, which does not read Rock Ridge), a FAT
// image with its long names (mtools; Windows reads VFAT names).
func windowsTree(t *testing.T, img string, media job.Media, dir string) string {
	t.Helper()
	if media == job.MediaVFAT {
		if out, err := exec.Command("mcopy", "-s", "-n", "-i", img, "::/*", dir).CombinedOutput(); err != nil {
			t.Fatalf("mcopy: %v: %s", err, out)
		}
		return "FAT long names (mtools)"
	}
	d, err := exec.Command("isoinfo", "-d", "-i", img).CombinedOutput()
	if err != nil {
		t.Fatalf("isoinfo -d: %v: %s", err, d)
	}
	if !bytes.Contains(d, []byte("Joliet with UCS level")) {
		t.Fatalf("the image has no Joliet tree: Windows would see only its ISO 9660 names\n%s", d)
	}
	list, err := exec.Command("isoinfo", "-J", "-f", "-i", img).Output()
	if err != nil {
		t.Fatalf("isoinfo -J -f: %v", err)
	}
	paths := strings.Fields(string(list))
	for _, p := range paths {
		isDir := slices.ContainsFunc(paths, func(q string) bool { return strings.HasPrefix(q, p+"/") })
		if isDir {
			continue
		}
		data, err := exec.Command("isoinfo", "-J", "-i", img, "-x", p).Output()
		if err != nil {
			t.Fatalf("isoinfo -J -x %s: %v", p, err)
		}
		f := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return "Joliet only (isoinfo -J)"
}

// cbiReport is what test/cloudbaseinit/read_payload.py prints.
type cbiReport struct {
	InstanceID    *string  `json:"instance_id"`
	HostName      *string  `json:"host_name"`
	ComputerName  *string  `json:"computer_name"`
	PublicKeys    []string `json:"public_keys"`
	AdminUsername *string  `json:"admin_username"`
	AdminPassword *string  `json:"admin_password"`
	Certs         []string `json:"certs"`
	Network       *struct {
		Links []struct {
			ID, Name, Type string
			MAC            string `json:"mac"`
			MTU            *int   `json:"mtu"`
		} `json:"links"`
		Networks []struct {
			Link        string   `json:"link"`
			AddressCIDR string   `json:"address_cidr"`
			DNS         []string `json:"dns"`
			Routes      []struct {
				NetworkCIDR string `json:"network_cidr"`
				Gateway     string `json:"gateway"`
			} `json:"routes"`
		} `json:"networks"`
		Services []struct {
			Addresses []string `json:"addresses"`
		} `json:"services"`
	} `json:"network"`
	NetworkCalls       []cbiCall `json:"network_calls"`
	UserData           *string   `json:"user_data"`
	ScriptExecutor     *string   `json:"script_executor"`
	CloudConfigPlugins []string  `json:"cloud_config_plugins"`
	UserDataCalls      []cbiCall `json:"user_data_calls"`
}

type cbiCall struct {
	Call      string `json:"call"`
	Args      []any  `json:"args"`
	Sysnative *bool  `json:"sysnative"`
	Extension string `json:"extension"`
	Script    string `json:"script"`
	Shell     *bool  `json:"shell"`
}

// cloudbaseInit returns the checkout named by VMPAYLOAD_CLOUDBASE_INIT, or
// skips the test saying how to get one (fails it under make test, which
// unpacks the pinned source: test/cloudbaseinit/source.sh).
func cloudbaseInit(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(CloudbaseInitEnv)
	if dir == "" {
		testenv.MissingJudge(t, "cloudbase-init's reader is not available; set %s to a checkout (git clone https://github.com/cloudbase/cloudbase-init, or the directory test/cloudbaseinit/source.sh prints; docs/windows.md)", CloudbaseInitEnv)
	}
	if _, err := os.Stat(filepath.Join(dir, "cloudbaseinit", "metadata", "services", "configdrive.py")); err != nil {
		t.Fatalf("%s=%s is not a cloudbase-init checkout: %v", CloudbaseInitEnv, dir, err)
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import oslo_config, oslo_log, netaddr, yaml, jinja2, requests, six").CombinedOutput(); err != nil {
		t.Fatalf("cloudbase-init's Python dependencies are missing (test/deps.sh installs them): %v: %s", err, out)
	}
	return dir
}

// readWithCloudbaseInit runs cloudbase-init's reader over tree in a
// scratch directory (its cloud-config write_files and scripts act there).
func readWithCloudbaseInit(t *testing.T, checkout, tree, service string) cbiReport {
	t.Helper()
	out := runReadPayload(t, t.TempDir(), nil, "cloudbase-init's reader", checkout, tree, service)
	var rep cbiReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("decoding the reader's report: %v\n%s", err, out)
	}
	return rep
}

// runReadPayload runs test/cloudbaseinit/read_payload.py with args
// (checkout, tree, and a service or "classify") in scratch, stdin (nil:
// none) as its input, and returns its standard output; what names it in a
// failure.
func runReadPayload(t *testing.T, scratch string, stdin []byte, what string, args ...string) []byte {
	t.Helper()
	script, err := filepath.Abs("../test/cloudbaseinit/read_payload.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", append([]string{script}, args...)...)
	cmd.Dir = scratch
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Env = append(os.Environ(), "TMPDIR="+scratch, "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, stderr.Bytes())
	}
	return out
}

// executorOf is the class cloudbase-init's userdatautils.get_command
// returns for a script kind.
var executorOf = map[job.WindowsUserDataKind]string{
	job.WinKindPS1: "PowershellSysnative", job.WinKindPS1x86: "Powershell", job.WinKindCmd: "Shell",
	job.WinKindShell: "Bash", job.WinKindPython: "Python", job.WinKindEC2: "CommandExecutor",
}

// TestWindowsExamplesJudgedByCloudbaseInit builds every Windows example
// image, extracts it as Windows sees it and has cloudbase-init's
// ConfigDriveService (NoCloudConfigDriveService for format nocloud) and
// its plugins read it: every field of the job must come through.
func TestWindowsExamplesJudgedByCloudbaseInit(t *testing.T) {
	checkout := cloudbaseInit(t)
	ctx := context.Background()
	for _, ex := range windowsExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			j := ex.job.Apply(job.Defaults{})
			dir := t.TempDir()
			r, err := payloadtest.Render(ex.job, secretsDir, payload.Options{})
			if err != nil {
				t.Fatal(err)
			}
			img := filepath.Join(dir, "seed"+payload.Extension(j.Media))
			res, err := r.Write(ctx, img, payload.Options{GID: -1, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			tree := filepath.Join(dir, "tree")
			if err := os.Mkdir(tree, 0o755); err != nil {
				t.Fatal(err)
			}
			how := windowsTree(t, img, j.Media, tree)
			t.Logf("extracted as %s", how)
			service := "configdrive"
			if j.Format == job.FormatNoCloud {
				service = "nocloud"
			}
			rep := readWithCloudbaseInit(t, checkout, tree, service)
			checkCloudbaseInit(t, &j, res, rep, adminPassword(t, ex.job))
		})
	}
}

func str(p *string) string {
	if p == nil {
		return "<none>"
	}
	return *p
}

func checkCloudbaseInit(t *testing.T, j *job.Job, res payload.Result, rep cbiReport, pw string) {
	t.Helper()
	if str(rep.InstanceID) != res.InstanceID {
		t.Errorf("instance id %s, built %q", str(rep.InstanceID), res.InstanceID)
	}
	if j.Hostname != "" {
		short, _, _ := strings.Cut(j.Hostname, ".")
		if str(rep.HostName) != j.Hostname || str(rep.ComputerName) != short {
			t.Errorf("host name %s, computer name %s; want %q, %q", str(rep.HostName), str(rep.ComputerName), j.Hostname, short)
		}
	}
	wantKeys := slices.Sorted(slices.Values(j.SSHAuthorizedKeys))
	if !reflect.DeepEqual(rep.PublicKeys, wantKeys) && !(len(wantKeys) == 0 && len(rep.PublicKeys) == 0) {
		t.Errorf("public keys %q, want %q", rep.PublicKeys, wantKeys)
	}
	wantUser := j.AdminUsername
	if (wantUser == "") != (rep.AdminUsername == nil) || (wantUser != "" && *rep.AdminUsername != wantUser) {
		t.Errorf("admin username %s, want %q", str(rep.AdminUsername), wantUser)
	}
	if (pw == "") != (rep.AdminPassword == nil) || (pw != "" && *rep.AdminPassword != pw) {
		t.Errorf("admin password read wrong (got one: %v, want one: %v)", rep.AdminPassword != nil, pw != "")
	}
	var wantCerts []string
	for _, c := range j.AdminCerts {
		wantCerts = append(wantCerts, strings.TrimSpace(c))
	}
	sort.Strings(wantCerts)
	if !reflect.DeepEqual(rep.Certs, wantCerts) && !(len(wantCerts) == 0 && len(rep.Certs) == 0) {
		t.Errorf("certificates %q, want %q", rep.Certs, wantCerts)
	}
	checkCloudbaseInitNetwork(t, j, rep)
	checkCloudbaseInitUserData(t, j, rep)
}

func checkCloudbaseInitNetwork(t *testing.T, j *job.Job, rep cbiReport) {
	t.Helper()
	if len(j.NICs) == 0 {
		if rep.Network != nil && len(rep.Network.Links) > 0 {
			t.Errorf("network links %v from a job without nics", rep.Network.Links)
		}
		return
	}
	if rep.Network == nil {
		t.Fatalf("cloudbase-init read no network details v2")
	}
	var ns []string
	if j.DNS != nil {
		ns = j.DNS.Nameservers
	}
	if len(ns) > 0 && (len(rep.Network.Services) != 1 || !reflect.DeepEqual(rep.Network.Services[0].Addresses, ns)) {
		t.Errorf("name server services %v, want %q", rep.Network.Services, ns)
	}
	var wantStatic []string
	for i, n := range j.NICs {
		name := n.Name
		if name == "" {
			name = fmt.Sprintf("eth%d", i)
		}
		var link *int
		for k, l := range rep.Network.Links {
			if strings.EqualFold(l.MAC, n.MAC) {
				link = &k
			}
		}
		if link == nil {
			t.Errorf("nics[%d]: no link with MAC %s in %+v", i, n.MAC, rep.Network.Links)
			continue
		}
		l := rep.Network.Links[*link]
		if l.Name != name || l.Type != "physical" || (n.MTU != 0) != (l.MTU != nil) || (l.MTU != nil && *l.MTU != n.MTU) {
			t.Errorf("nics[%d]: link %+v, want name %q, MTU %d", i, l, name, n.MTU)
		}
		if !hasCall(rep.NetworkCalls, "rename_network_adapter", name) {
			t.Errorf("nics[%d]: the adapter is not renamed to %q: %+v", i, name, rep.NetworkCalls)
		}
		for _, c := range []*job.IPConfig{n.IPv4, n.IPv6} {
			if c == nil || c.Method != job.MethodStatic {
				continue
			}
			pfx := netip.MustParsePrefix(c.Address)
			want := []any{name, pfx.Addr().String(), fmt.Sprint(pfx.Bits()), nil, nil}
			if c.Gateway != "" {
				want[3] = c.Gateway
			}
			// config-2 gives each network the job's name servers; from
			// NoCloud's global list cloudbase-init takes those of the
			// address's family
			var l []any
			for _, s := range ns {
				if j.Format == job.FormatConfigDrive || netip.MustParseAddr(s).Is6() == pfx.Addr().Is6() {
					l = append(l, s)
				}
			}
			if len(l) > 0 {
				want[4] = l
			}
			wantStatic = append(wantStatic, fmt.Sprint(want))
		}
	}
	// DHCP and SLAAC networks get no static settings; static ones their
	// address, prefix, default gateway (from the route of prefix 0) and
	// name servers
	var gotStatic []string
	for _, c := range rep.NetworkCalls {
		if c.Call == "set_static_network_config" {
			if len(c.Args) == 5 && c.Args[4] != nil && len(c.Args[4].([]any)) == 0 {
				c.Args[4] = nil
			}
			gotStatic = append(gotStatic, fmt.Sprint(c.Args))
		}
	}
	sort.Strings(wantStatic)
	sort.Strings(gotStatic)
	if !reflect.DeepEqual(gotStatic, wantStatic) {
		t.Errorf("static configurations\n got  %q\n want %q", gotStatic, wantStatic)
	}
}

func hasCall(calls []cbiCall, name string, lastArg any) bool {
	for _, c := range calls {
		if c.Call == name && len(c.Args) > 0 && c.Args[len(c.Args)-1] == lastArg {
			return true
		}
	}
	return false
}

func checkCloudbaseInitUserData(t *testing.T, j *job.Job, rep cbiReport) {
	t.Helper()
	var raw string
	switch {
	case j.UserData != "":
		raw = j.UserData
	case j.UserDataBase64 != "":
		b, _ := base64.StdEncoding.DecodeString(j.UserDataBase64)
		raw = string(b)
	case j.UserDataSecret != "":
		b, err := os.ReadFile(filepath.Join(secretsDir, j.UserDataSecret))
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	if raw == "" {
		// config-2: no document; NoCloud: an empty user-data (cloud-init's
		// NoCloud needs the file), which cloudbase-init skips
		if rep.UserData != nil && *rep.UserData != "" {
			t.Errorf("user data %q from a job without", *rep.UserData)
		}
		return
	}
	text, err := job.UserDataText(raw)
	if err != nil {
		t.Fatal(err)
	}
	if str(rep.UserData) != base64.StdEncoding.EncodeToString([]byte(text)) {
		t.Errorf("user data %s, want base64 of %q", str(rep.UserData), text)
	}
	kind := job.ClassifyWindowsUserData(text)
	if exe, ok := executorOf[kind]; ok {
		if str(rep.ScriptExecutor) != exe {
			t.Errorf("cloudbase-init detects %s, vmpayload classifies %q (want %s)", str(rep.ScriptExecutor), kind, exe)
		}
		if len(rep.UserDataCalls) == 0 {
			t.Errorf("cloudbase-init ran no %s script", kind)
		}
		for _, c := range rep.UserDataCalls {
			body, _ := base64.StdEncoding.DecodeString(c.Script)
			if len(body) == 0 || !strings.Contains(text, strings.TrimSpace(string(body))) {
				t.Errorf("cloudbase-init ran %q, not the user data %q", body, text)
			}
			wantX86 := kind == job.WinKindPS1x86
			if c.Call == "execute_powershell_script" && (c.Sysnative == nil || *c.Sysnative == wantX86) {
				t.Errorf("%s ran with sysnative %v", kind, c.Sysnative)
			}
		}
	}
	if kind == job.WinKindCloudConfig {
		var keys []string
		for _, line := range strings.Split(text, "\n") {
			if k, _, ok := strings.Cut(line, ":"); ok && k != "" && !strings.HasPrefix(k, " ") && !strings.HasPrefix(k, "#") {
				keys = append(keys, k)
			}
		}
		got := slices.Sorted(slices.Values(rep.CloudConfigPlugins))
		if !reflect.DeepEqual(got, slices.Sorted(slices.Values(keys))) {
			t.Errorf("cloudbase-init's cloud-config plugins %q, the user data gives %q", got, keys)
		}
		if len(rep.UserDataCalls) == 0 {
			t.Errorf("cloudbase-init's cloud-config plugins did nothing")
		}
	}
}

// TestWindowsUserDataKindsAgreeWithCloudbaseInit: for each user-data text,
// the kind vmpayload's check gives it (job.ClassifyWindowsUserData, which
// decides what is refused and what merge mode refuses) is the branch
// cloudbase-init's UserDataPlugin takes with it, observed in its own code.
func TestWindowsUserDataKindsAgreeWithCloudbaseInit(t *testing.T) {
	checkout := cloudbaseInit(t)
	texts := []string{
		"#ps1_sysnative\nWrite-Host hi\n", "#ps1_sysnative\r\nWrite-Host hi\r\n", "#ps1\nx", "#ps1 x", "#ps1",
		"#ps1_sysnativex\n", "#PS1\nx", " #ps1\nx", "\n#ps1\nx", "#ps1_x86\nx", "#ps1_x86", "#ps1_x86\t1",
		"rem cmd\r\ndir\r\n", "rem   cmd\tdir", "rem cmd", "REM CMD\r\ndir", "remcmd\ndir",
		"#!/usr/bin/env python\nprint(1)\n", "#!/usr/bin/env python3\nprint(1)\n", "#! /usr/bin/env  python \n", "#!/bin/bash\necho\n", "#!",
		"<powershell>Write-Host hi</powershell>", "echo\n<script>dir</script>", "</script>", "<SCRIPT>dir</SCRIPT>", "#ps1\n<script>x</script>",
		"#cloud-config\nset_timezone: UTC\n", "#cloud-config", " #cloud-config\n{}", "#Cloud-Config\n{}\n",
		"## template: jinja\n#ps1\n{{ v1.instance_id }}\n", "##template:JINJA\n#ps1\nx", "## template: jinja extra\n#ps1\n", "## template: mustache\n#ps1\n",
		"Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/x-shellscript\n\n#ps1\nx\n--b--\n",
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n--b--\n", "content-type: multipart/mixed; boundary=b\n\n--b--\n",
		"#ps1\n\nContent-Type: multipart/mixed\n",
		"-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n", "  \n-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
		"Write-Host hi\n", "echo hi\n",
	}
	var in []string
	for _, s := range texts {
		in = append(in, base64.StdEncoding.EncodeToString([]byte(s)))
	}
	body, _ := json.Marshal(in)
	scratch := t.TempDir()
	tree := filepath.Join(scratch, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "openstack", "latest"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "openstack", "latest", "meta_data.json"), []byte(`{"uuid": "iid-1", "hostname": "win1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runReadPayload(t, scratch, body, "cloudbase-init's user-data plugin", checkout, tree, "classify")
	var branches [][]string
	if err := json.Unmarshal(out, &branches); err != nil || len(branches) != len(texts) {
		t.Fatalf("decoding %s: %v", out, err)
	}
	for i, s := range texts {
		k := job.ClassifyWindowsUserData(s)
		want := map[job.WindowsUserDataKind]string{
			job.WinKindMultipart: "multipart", job.WinKindTemplate: "template", job.WinKindCloudConfig: "cloud-config",
			job.WinKindCertificate: "x509", job.WinKindUnknown: "unsupported",
		}[k]
		if e, ok := executorOf[k]; ok {
			want = e
		}
		if len(branches[i]) == 0 || branches[i][0] != want {
			t.Errorf("%q: vmpayload says %q (%s), cloudbase-init takes %q", s, k, want, branches[i])
		}
	}
}

// BenchmarkRenderWindows is payload.Check and payload.Render of the full
// Windows example (its administrator password from a secret enters the
// content hash as a SHA-512 crypt) beside the full Linux config-drive
// example (a plaintext password, hashed twice): compare them in one run.
func BenchmarkRenderWindows(b *testing.B) {
	for _, p := range []string{windowsExamplesDir + "/01-configdrive-full.json", examplesDir + "/03-full-configdrive.json"} {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		j, rep := job.Parse(data)
		if !rep.OK() {
			b.Fatal(rep.Err())
		}
		b.Run(strings.TrimSuffix(filepath.Base(p), ".json"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := payloadtest.Render(j, secretsDir, payload.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
