package payload_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/job/jobtest"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/test/golden"
	"github.com/vmpayload/vmpayload/test/judge"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const examplesDir = "../configs/examples"
const secretsDir = "../configs/examples/secrets"

// fixedSalt makes password hashes stable for golden files.
func fixedSalt() (string, error) { return "goldensalt", nil }

// fixedRand makes generated random seeds stable for golden files.
type fixedRand struct{}

func (fixedRand) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i*7 + 3)
	}
	return len(p), nil
}

type example struct {
	name string
	job  *job.Job
}

// buildableExamples returns every example job that produces an image
// (attach of a prebuilt image and detach do not), and the large-file jobs.
func buildableExamples(t *testing.T) []example {
	t.Helper()
	var out []example
	for _, e := range payloadtest.BuildableExamples(t, examplesDir) {
		out = append(out, example{e.Name, e.Job})
	}
	return append(out, largeFileExamples(t)...)
}

// largeFileExamples are jobs with file contents around and above
// cloudinit.PlainContentLimit (written base64 as pre-formatted scalars),
// through each way the generated cloud-config reaches user-data: alone,
// merged with a cloud-config user_data, and in a multipart with a script.
func largeFileExamples(t *testing.T) []example {
	t.Helper()
	lim := cloudinit.PlainContentLimit
	// text with everything YAML would have to escape or fold
	tricky := "line one: \"quoted\" 'single' \\ back\tslash\r\n---\n# not a comment\n  indented: [x, y]\n€ ünïcödé ✓\n"
	ascii := strings.Replace(tricky, "€ ünïcödé ✓", "ascii only", 1)
	text := func(n int) string { return (strings.Repeat(tricky, n/len(tricky)+1))[:n-1] + "\n" }
	// a multipart's generated cloud-config with non-ASCII text is not read by
	// cloud-init 22.4 (known, not about large files): ASCII there
	asciiText := func(n int) string { return (strings.Repeat(ascii, n/len(ascii)+1))[:n-1] + "\n" }
	bin := make([]byte, 6000)
	for i := range bin {
		bin[i] = byte(i*7 + i/251)
	}
	files := func(text func(int) string) []any {
		return []any{
			map[string]any{"path": "/srv/just-below", "content": text(lim - 1), "permissions": "0644"},
			map[string]any{"path": "/srv/at-limit", "content": text(lim), "permissions": "0600"},
			map[string]any{"path": "/srv/big.txt", "content": text(20000), "owner": "root:root"},
			map[string]any{"path": "/srv/big.bin", "content": base64.StdEncoding.EncodeToString(bin), "encoding": "base64"},
			map[string]any{"path": "/srv/small.bin", "content": base64.StdEncoding.EncodeToString(bin[:100]), "encoding": "base64"},
			map[string]any{"path": "/srv/motd", "content": "small and readable\n"},
		}
	}
	mk := func(name string, files []any, extra map[string]any) example {
		j := map[string]any{"version": 1, "hostname": "large-01", "files": files}
		for k, v := range extra {
			j[k] = v
		}
		return example{name, jobtest.Decoded(t, j)}
	}
	return []example{
		mk("zz-large-files", files(text), nil),
		mk("zz-large-files-merge", files(text), map[string]any{"user_data": "#cloud-config\nwrite_files:\n  - path: /srv/from-user\n    content: from user_data\n"}),
		mk("zz-large-files-script-configdrive", files(asciiText), map[string]any{"format": "configdrive", "user_data": "#!/bin/sh\necho hi\n"}),
		// every entry one-line or base64 (a former fast path's class); its
		// golden was written by go-yaml alone
		mk("zz-large-files-plain", []any{
			map[string]any{"path": "/srv/data/big.txt", "content": text(20000), "permissions": "0644"},
			map[string]any{"path": "/srv/data/big.bin", "content": base64.StdEncoding.EncodeToString(bin), "encoding": "base64", "permissions": "0600", "owner": "nobody:nogroup"},
			map[string]any{"path": "/etc/systemd/system/getty@tty1.service.d/override.conf", "content": text(lim), "permissions": "644", "owner": "root:root"},
			map[string]any{"path": "/srv/small.bin", "content": base64.StdEncoding.EncodeToString(bin[:100]), "encoding": "base64"},
			map[string]any{"path": "/srv/one-line", "content": "no_line_break"},
			map[string]any{"path": "/srv/empty", "content": ""},
		}, map[string]any{"runcmd": []any{"echo hi"}}),
	}
}

// TestGolden compares every rendered document of every example with its
// golden file. Run with -update to rewrite them after an intended change.
func TestGolden(t *testing.T) {
	for _, ex := range buildableExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			r, err := payloadtest.Render(ex.job, secretsDir, payload.Options{Salt: fixedSalt, Rand: fixedRand{}})
			if err != nil {
				t.Fatal(err)
			}
			assertGoldenDocs(t, filepath.Join("testdata", "golden", ex.name), r)
		})
	}
}

// TestExamplesJudgedByCloudInit builds every example image and has real
// cloud-init read it; every field of the job must come through.
func TestExamplesJudgedByCloudInit(t *testing.T) {
	ctx := context.Background()
	if err := judge.CheckEnvironment(ctx); err != nil {
		t.Fatalf("the cloud-init judge cannot run here (make test installs it): %v", err)
	}
	for _, ex := range buildableExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "seed"+payload.Extension(ex.job.Apply(job.Defaults{}).Media))
			res, rep := judgeImage(t, ctx, ex.job, secretsDir, out)
			checkAgainstJob(t, ex.job.Apply(job.Defaults{}), res, rep)
		})
	}
}

// assertGoldenDocs compares the documents of r with their golden files
// in dir, and fails on a golden file of a document r does not have
// (-update rewrites dir).
func assertGoldenDocs(t *testing.T, dir string, r *payload.Rendered) {
	t.Helper()
	if *update {
		os.RemoveAll(dir)
	}
	var want, have []string
	for _, f := range r.Docs.Files {
		want = append(want, f.Path)
		golden.Compare(t, filepath.Join(dir, filepath.FromSlash(f.Path)), f.Data, *update)
	}
	// no stale golden files for documents no longer rendered
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			have = append(have, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(want)
	sort.Strings(have)
	if !reflect.DeepEqual(want, have) {
		t.Errorf("documents %v, golden files %v", want, have)
	}
}

// judgeImage renders j (secrets from secrets), writes its image to out
// and has real cloud-init read it.
func judgeImage(t *testing.T, ctx context.Context, j *job.Job, secrets, out string) (payload.Result, *judge.Report) {
	t.Helper()
	r, err := payloadtest.Render(j, secrets, payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Write(ctx, out, payload.Options{GID: -1})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := judge.Judge(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	return res, rep
}

func checkAgainstJob(t *testing.T, j job.Job, res payload.Result, rep *judge.Report) {
	t.Helper()
	if !rep.OK() {
		t.Fatalf("cloud-init complains: valid_seed=%v datasource=%q errors=%q", rep.ValidSeed, rep.Datasource, rep.AllErrors())
	}
	wantDS, wantLabel := judge.NoCloud, "cidata"
	if j.Format == job.FormatConfigDrive {
		wantDS, wantLabel = judge.ConfigDrive, "config-2"
	}
	if rep.Datasource != wantDS || !strings.EqualFold(rep.Label, wantLabel) {
		t.Errorf("datasource %q label %q, want %q %q", rep.Datasource, rep.Label, wantDS, wantLabel)
	}
	wantFS := map[job.Media]string{job.MediaISO: "iso9660", job.MediaVFAT: "vfat"}[j.Media]
	if rep.FSType != wantFS {
		t.Errorf("blkid type %q, want %q", rep.FSType, wantFS)
	}
	if rep.InstanceID != res.InstanceID {
		t.Errorf("cloud-init's instance-id %q, build reported %q", rep.InstanceID, res.InstanceID)
	}
	if j.InstanceID != "" && rep.InstanceID != j.InstanceID {
		t.Errorf("instance-id %q, job pinned %q", rep.InstanceID, j.InstanceID)
	}
	if j.Hostname != "" && rep.Hostname != j.Hostname {
		t.Errorf("hostname %q, want %q", rep.Hostname, j.Hostname)
	}
	for _, k := range j.SSHAuthorizedKeys {
		if !contains(rep.PublicKeys, k) {
			t.Errorf("public key %q missing from cloud-init's public keys %q", k, rep.PublicKeys)
		}
	}
	cc := rep.MergedCloudConfig
	if j.UserDataMode == job.ModeReplace {
		if strings.TrimSpace(rep.UserDataRaw) != strings.TrimSpace(j.UserData) {
			t.Errorf("replace mode: user-data %q, want the job's verbatim", rep.UserDataRaw)
		}
	}
	if j.Timezone != "" && cc["timezone"] != j.Timezone {
		t.Errorf("timezone %v, want %q", cc["timezone"], j.Timezone)
	}
	if j.SSHPasswordAuth != nil && cc["ssh_pwauth"] != *j.SSHPasswordAuth {
		t.Errorf("ssh_pwauth %v, want %v", cc["ssh_pwauth"], *j.SSHPasswordAuth)
	}
	checkUsers(t, j, cc)
	checkSeeds(t, j, res, rep)
	checkFiles(t, j, rep)
	checkRuncmd(t, j, cc)
	checkUserData(t, j, rep)
	checkNetwork(t, j, rep)
	if j.VendorData != "" && rep.VendorData == nil {
		t.Errorf("vendor-data missing")
	}
	for k, v := range j.MetaData {
		got, _ := json.Marshal(rep.MetaData[k])
		want, _ := json.Marshal(v)
		if string(got) != string(want) {
			t.Errorf("meta-data %q = %s, want %s", k, got, want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func checkUsers(t *testing.T, j job.Job, cc map[string]any) {
	users, _ := cc["users"].([]any)
	byName := map[string]map[string]any{}
	for _, u := range users {
		if m, ok := u.(map[string]any); ok {
			byName[fmt.Sprint(m["name"])] = m
		}
	}
	if len(j.Users) > 0 && !reflect.DeepEqual(users[0], "default") {
		t.Errorf("first user %v, want the image's default user kept", users[0])
	}
	for i, u := range j.Users {
		m := byName[u.Name]
		if m == nil {
			t.Errorf("users[%d] %q not in cloud-init's users %v", i, u.Name, users)
			continue
		}
		hash, _ := m["passwd"].(string)
		if u.Name == "root" {
			// cloud-init skips useradd (and with it passwd) for an
			// existing account; hashed_passwd is set with chpasswd -e
			if _, ok := m["passwd"]; ok {
				t.Errorf("users[%d]: root has passwd, which cloud-init ignores for an existing account", i)
			}
			hash, _ = m["hashed_passwd"].(string)
			if m["lock_passwd"] != false && (u.LockPassword == nil || !*u.LockPassword) {
				t.Errorf("users[%d]: root would be locked: lock_passwd=%v", i, m["lock_passwd"])
			}
		}
		if strings.Contains(fmt.Sprint(cc), u.Password) && u.Password != "" {
			t.Errorf("users[%d]: plaintext password reached the image", i)
		}
		plain := u.Password
		if u.PasswordSecret != "" {
			b, err := os.ReadFile(filepath.Join(secretsDir, u.PasswordSecret))
			if err != nil {
				t.Fatal(err)
			}
			plain = strings.TrimRight(string(b), "\n")
		}
		switch {
		case plain != "":
			if !strings.HasPrefix(hash, "$6$") {
				t.Errorf("users[%d]: passwd %q is not a SHA-512 crypt hash", i, hash)
			}
			ok, err := judge.HashVerifies(hash, plain)
			if err != nil || !ok {
				t.Errorf("users[%d]: hash %q does not verify against the job's password (%v)", i, hash, err)
			}
			if m["lock_passwd"] != false && (u.LockPassword == nil || !*u.LockPassword) {
				t.Errorf("users[%d]: password given but lock_passwd=%v", i, m["lock_passwd"])
			}
		case u.PasswordHash != "":
			if hash != u.PasswordHash {
				t.Errorf("users[%d]: passwd %q, want the job's hash %q", i, hash, u.PasswordHash)
			}
		}
		keys := fmt.Sprint(m["ssh_authorized_keys"])
		for _, k := range u.SSHAuthorizedKeys {
			if !strings.Contains(keys, k) {
				t.Errorf("users[%d]: key %q missing", i, k)
			}
		}
		if u.Shell != "" && m["shell"] != u.Shell {
			t.Errorf("users[%d]: shell %v, want %q", i, m["shell"], u.Shell)
		}
		if u.Sudo != "" && fmt.Sprint(m["sudo"]) != u.Sudo {
			t.Errorf("users[%d]: sudo %v, want %q", i, m["sudo"], u.Sudo)
		}
		for _, g := range u.Groups {
			if !strings.Contains(fmt.Sprint(m["groups"]), g) {
				t.Errorf("users[%d]: group %q missing from %v", i, g, m["groups"])
			}
		}
	}
}

// checkFiles compares each job file with what cloud-init's write_files
// module would write (its own decoding of the encoding: b64 or text): the
// same bytes, mode and owner. Contents of payload/cloudinit.PlainContentLimit
// bytes or more are base64 in user-data, smaller ones readable text.
func checkFiles(t *testing.T, j job.Job, rep *judge.Report) {
	cc := rep.MergedCloudConfig
	wf, _ := cc["write_files"].([]any)
	byPath := map[string]map[string]any{}
	for _, f := range wf {
		if m, ok := f.(map[string]any); ok {
			byPath[fmt.Sprint(m["path"])] = m
		}
	}
	written := map[string][]byte{}
	if rep.UserData != nil {
		for _, f := range rep.UserData.WriteFiles {
			written[f.Path] = f.Content
		}
	}
	for i, f := range j.Files {
		m := byPath[f.Path]
		if m == nil {
			t.Errorf("files[%d] %q not in write_files", i, f.Path)
			continue
		}
		want := []byte(f.Content)
		if f.Encoding == job.EncodingBase64 {
			var err error
			if want, err = base64.StdEncoding.DecodeString(f.Content); err != nil {
				t.Fatalf("files[%d]: %v", i, err)
			}
		}
		if got, ok := written[f.Path]; !ok || !bytes.Equal(got, want) {
			t.Errorf("files[%d]: cloud-init writes %d bytes (found %v), want the job's %d", i, len(got), ok, len(want))
		}
		big := len(want) >= cloudinit.PlainContentLimit
		switch {
		case (f.Encoding == job.EncodingBase64 || big) && m["encoding"] != "b64":
			t.Errorf("files[%d]: encoding %v, want b64", i, m["encoding"])
		case f.Encoding != job.EncodingBase64 && !big && (m["encoding"] != nil || fmt.Sprint(m["content"]) != f.Content):
			t.Errorf("files[%d]: a %d-byte text file is not plain text in user-data: encoding %v", i, len(want), m["encoding"])
		}
		if f.Permissions != "" && strings.TrimLeft(fmt.Sprint(m["permissions"]), "0") != strings.TrimLeft(f.Permissions, "0") {
			t.Errorf("files[%d]: permissions %v, want %s", i, m["permissions"], f.Permissions)
		}
		if f.Owner != "" && m["owner"] != f.Owner {
			t.Errorf("files[%d]: owner %v, want %s", i, m["owner"], f.Owner)
		}
	}
}

func checkRuncmd(t *testing.T, j job.Job, cc map[string]any) {
	got := fmt.Sprint(cc["runcmd"])
	for i, c := range j.Runcmd {
		want := c.Shell
		if c.IsArgv() {
			want = fmt.Sprint(toAny(c.Argv))
		}
		if !strings.Contains(got, want) {
			t.Errorf("runcmd[%d] %q not in cloud-init's runcmd %s", i, want, got)
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

func checkUserData(t *testing.T, j job.Job, rep *judge.Report) {
	ud := j.UserData
	if j.UserDataSecret != "" {
		b, err := os.ReadFile(filepath.Join(secretsDir, j.UserDataSecret))
		if err != nil {
			t.Fatal(err)
		}
		ud = string(b)
	}
	if ud == "" || j.UserDataMode == job.ModeReplace {
		return
	}
	switch job.ClassifyUserData(ud) {
	case job.KindCloudConfig:
		um, err := job.ParseYAMLMap(ud)
		if err != nil {
			t.Fatal(err)
		}
		cc := rep.MergedCloudConfig
		for k, v := range um {
			got := fmt.Sprint(cc[k])
			if l, ok := v.([]any); ok {
				for _, e := range l {
					if !strings.Contains(got, fmt.Sprint(e)) {
						t.Errorf("merged %s lacks the user's %v: %s", k, e, got)
					}
				}
			} else if got != fmt.Sprint(v) {
				t.Errorf("merged %s = %s, want the user's %v", k, got, v)
			}
		}
	case job.KindScript:
		found := false
		for _, s := range rep.Scripts {
			found = found || strings.TrimSpace(s.Content) == strings.TrimSpace(ud)
		}
		if !found {
			t.Errorf("the user's script is not among cloud-init's script parts %+v", rep.Scripts)
		}
	case job.KindMultipart:
		if len(rep.Scripts) == 0 || len(rep.Parts) < 3 {
			t.Errorf("multipart user-data: %d parts, %d scripts; want the generated part and both user parts", len(rep.Parts), len(rep.Scripts))
		}
		if !strings.Contains(fmt.Sprint(rep.MergedCloudConfig["runcmd"]), "part-one") {
			t.Errorf("the user's cloud-config part is not in the merged config: %v", rep.MergedCloudConfig)
		}
	}
}

// checkNetwork asserts that cloud-init's parsed network state has every NIC
// of the job with its MAC, MTU and addresses.
func checkNetwork(t *testing.T, j job.Job, rep *judge.Report) {
	if j.NetworkData != nil {
		checkNetworkData(t, j, rep)
		return
	}
	if len(j.NICs) == 0 && j.NetworkConfig == "" {
		if rep.NetworkConfigRaw != "" {
			t.Errorf("network-config present without network settings: %q", rep.NetworkConfigRaw)
		}
		return
	}
	state, _ := json.Marshal(rep.NetworkState)
	ifaces, _ := rep.NetworkState["interfaces"].(map[string]any)
	if len(ifaces) == 0 {
		t.Fatalf("cloud-init derived no interfaces: %s", state)
	}
	for i, n := range j.NICs {
		var iface map[string]any
		for _, v := range ifaces {
			m, _ := v.(map[string]any)
			if strings.EqualFold(fmt.Sprint(m["mac_address"]), n.MAC) {
				iface = m
			}
		}
		if iface == nil {
			t.Errorf("nics[%d]: no interface with MAC %s in %s", i, n.MAC, state)
			continue
		}
		if n.Name != "" && iface["name"] != n.Name {
			t.Errorf("nics[%d]: name %v, want %s", i, iface["name"], n.Name)
		}
		if n.MTU != 0 && fmt.Sprint(iface["mtu"]) != fmt.Sprint(n.MTU) {
			t.Errorf("nics[%d]: mtu %v, want %d", i, iface["mtu"], n.MTU)
		}
		sub, _ := json.Marshal(iface["subnets"])
		for _, c := range []*job.IPConfig{n.IPv4, n.IPv6} {
			if c == nil {
				continue
			}
			switch c.Method {
			case job.MethodStatic:
				p := netip.MustParsePrefix(c.Address)
				if !strings.Contains(string(sub), `"`+p.Addr().String()) || !strings.Contains(string(sub), fmt.Sprintf(`"prefix":%d`, p.Bits())) {
					t.Errorf("nics[%d]: address %s not in subnets %s", i, c.Address, sub)
				}
				if c.Gateway != "" && !strings.Contains(string(sub), c.Gateway) {
					t.Errorf("nics[%d]: gateway %s not in subnets %s", i, c.Gateway, sub)
				}
			case job.MethodDHCP:
				if !strings.Contains(string(sub), "dhcp") {
					t.Errorf("nics[%d]: no DHCP subnet in %s", i, sub)
				}
			case job.MethodSLAAC:
				if !strings.Contains(string(sub), "slaac") && !strings.Contains(string(sub), "ipv6_slaac") {
					t.Errorf("nics[%d]: no SLAAC subnet in %s", i, sub)
				}
			}
		}
	}
	if j.DNS != nil {
		for _, ns := range j.DNS.Nameservers {
			if !strings.Contains(string(state), ns) {
				t.Errorf("nameserver %s not in network state", ns)
			}
		}
		for _, s := range j.DNS.Search {
			if !strings.Contains(string(state), s) {
				t.Errorf("search domain %s not in network state", s)
			}
		}
	}
	for kind, files := range rep.RenderedNetwork {
		if len(files) == 0 {
			t.Errorf("cloud-init rendered no %s files", kind)
		}
	}
}

// checkSeeds asserts the fields of issue 12 as cloud-init reads them:
// locale, host keys (exactly the secrets' keys), power_state, phone_home
// and the random seed's bytes.
func checkSeeds(t *testing.T, j job.Job, res payload.Result, rep *judge.Report) {
	t.Helper()
	cc := rep.MergedCloudConfig
	if j.Locale != "" && cc["locale"] != j.Locale {
		t.Errorf("locale %v, want %q", cc["locale"], j.Locale)
	}
	if len(j.SSHHostKeys) > 0 {
		keys, _ := cc["ssh_keys"].(map[string]any)
		if len(keys) != 2*len(j.SSHHostKeys) {
			t.Errorf("ssh_keys has %d entries, want a private and public key for each of %d types", len(keys), len(j.SSHHostKeys))
		}
		if cc["ssh_deletekeys"] != true {
			t.Errorf("ssh_deletekeys %v, want true so that only the given keys remain", cc["ssh_deletekeys"])
		}
		for i, k := range j.SSHHostKeys {
			priv, err := os.ReadFile(filepath.Join(secretsDir, k.PrivateKeySecret))
			if err != nil {
				t.Fatal(err)
			}
			if keys[k.Type+"_private"] != string(priv) {
				t.Errorf("ssh_host_keys[%d]: %s_private is not the secret's key", i, k.Type)
			}
			pub, err := os.ReadFile(filepath.Join(secretsDir, k.PrivateKeySecret+".pub"))
			if err != nil {
				t.Fatal(err)
			}
			f := strings.Fields(string(pub))
			got := strings.Fields(fmt.Sprint(keys[k.Type+"_public"]))
			if len(got) < 2 || got[0] != f[0] || got[1] != f[1] {
				t.Errorf("ssh_host_keys[%d]: %s_public %v, want ssh-keygen's %s %s", i, k.Type, keys[k.Type+"_public"], f[0], f[1])
			}
		}
	}
	if ps := j.PowerState; ps != nil {
		m, _ := cc["power_state"].(map[string]any)
		if m["mode"] != ps.Mode || fmt.Sprint(m["message"]) != ps.Message && ps.Message != "" {
			t.Errorf("power_state %v, want mode %q message %q", m, ps.Mode, ps.Message)
		}
		wantDelay := any("now")
		if ps.DelayMinutes > 0 {
			wantDelay = float64(ps.DelayMinutes)
		}
		if m["delay"] != wantDelay {
			t.Errorf("power_state.delay %#v, want %#v", m["delay"], wantDelay)
		}
		if ps.Condition != nil && fmt.Sprint(m["condition"]) != fmt.Sprint(ps.Condition.Shell) && fmt.Sprint(m["condition"]) != fmt.Sprint(toAny(ps.Condition.Argv)) {
			t.Errorf("power_state.condition %v, want %v", m["condition"], ps.Condition)
		}
	}
	if ph := j.PhoneHome; ph != nil {
		m, _ := cc["phone_home"].(map[string]any)
		if m["url"] != ph.URL {
			t.Errorf("phone_home.url %v, want %q", m["url"], ph.URL)
		}
		wantPost := any("all")
		if len(ph.Post) > 0 {
			wantPost = toAny(ph.Post)
		}
		if !reflect.DeepEqual(m["post"], wantPost) {
			t.Errorf("phone_home.post %v, want %v", m["post"], wantPost)
		}
	}
	if rs := j.RandomSeed; rs != nil {
		if rep.RandomSeed == "" {
			t.Errorf("cloud-init's seed_random would add no random seed")
		} else if rs.Data != "" && rep.RandomSeed != rs.Data {
			t.Errorf("seed_random would write %s, want the job's %s", rep.RandomSeed, rs.Data)
		} else if b, _ := base64.StdEncoding.DecodeString(rep.RandomSeed); rs.GenerateBytes != 0 && len(b) != rs.GenerateBytes {
			t.Errorf("seed_random would write %d bytes, want %d", len(b), rs.GenerateBytes)
		}
	} else if rep.RandomSeed != "" {
		t.Errorf("random seed %q without random_seed in the job", rep.RandomSeed)
	}
}

// checkNetworkData asserts that cloud-init's converter turns the job's
// network_data into a config with every link's MAC and every static
// address.
func checkNetworkData(t *testing.T, j job.Job, rep *judge.Report) {
	t.Helper()
	state, _ := json.Marshal(rep.NetworkState)
	cfg, _ := json.Marshal(rep.NetworkConfig)
	if len(rep.NetworkState) == 0 {
		t.Fatalf("cloud-init derived no network state from network_data: %s", rep.NetworkConfigRaw)
	}
	links, _ := j.NetworkData["links"].([]any)
	for i, l := range links {
		m, _ := l.(map[string]any)
		if mac, _ := m["ethernet_mac_address"].(string); mac != "" && !strings.Contains(strings.ToLower(string(state)), strings.ToLower(mac)) {
			t.Errorf("network_data.links[%d]: MAC %s not in cloud-init's network state %s", i, mac, state)
		}
	}
	nets, _ := j.NetworkData["networks"].([]any)
	for i, n := range nets {
		m, _ := n.(map[string]any)
		if ip, _ := m["ip_address"].(string); ip != "" && !strings.Contains(string(cfg), ip) {
			t.Errorf("network_data.networks[%d]: address %s not in cloud-init's network config %s", i, ip, cfg)
		}
	}
	for kind, files := range rep.RenderedNetwork {
		if len(files) == 0 {
			t.Errorf("net-convert to %s rendered nothing", kind)
		}
	}
}
