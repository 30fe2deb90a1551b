package payload_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/test/judge"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// The rule vmpayload keeps for user-data and vendor-data (issue 18): for
// every input cloud-init accepts, cloud-init's loader applied to what
// vmpayload wrote gives the same data as cloud-init's loader applied to the
// input — in merge mode merged with the generated config (mappings merged,
// lists joined with the generated items first, the user's values winning).
// Both sides are read by the real cloud-init (test/judge).

// ruleInput is one user-data (or vendor-data) input.
type ruleInput struct {
	name string
	data []byte
	// includes are served at judge.IncludePrefix+name.
	includes map[string]string
	// want are key: value pairs (JSON) cloud-init must load from the input
	// itself, so that the comparison is not between two empty configs.
	want map[string]any
}

// carry is what ruleCheck carries an input as.
type carry struct {
	format job.Format
	media  job.Media
	mode   job.UserDataMode
	vendor bool // as vendor-data instead of user-data
}

func (c carry) String() string {
	s := fmt.Sprintf("%s-%s-%s", c.format, c.media, c.mode)
	if c.vendor {
		s += "-vendor"
	}
	return s
}

// allCarries is every combination the issue asks for: both formats, both
// media, both user-data modes, and as vendor-data.
func allCarries() []carry {
	var out []carry
	for _, f := range []job.Format{job.FormatNoCloud, job.FormatConfigDrive} {
		for _, m := range []job.Media{job.MediaISO, job.MediaVFAT} {
			for _, mode := range []job.UserDataMode{job.ModeMerge, job.ModeReplace} {
				out = append(out, carry{f, m, mode, false})
			}
			out = append(out, carry{f, m, job.ModeMerge, true})
		}
	}
	return out
}

// ruleJob is the job an input is carried in: merge mode adds generated
// content of every kind that has lists, mappings and scalars.
func ruleJob(in ruleInput, c carry) *job.Job {
	j := &job.Job{Version: 1, Format: c.format, Media: c.media, Hostname: "rule-host", UserDataMode: c.mode}
	enc := base64.StdEncoding.EncodeToString(in.data)
	if c.vendor {
		j.VendorDataBase64 = enc
		j.UserDataMode = ""
	} else {
		j.UserDataBase64 = enc
	}
	if c.mode == job.ModeMerge || c.vendor {
		f := false
		j.SSHPasswordAuth = &f
		j.Timezone = "Europe/Berlin"
		j.Runcmd = []job.Command{{Shell: "echo generated-runcmd"}}
		j.Users = []job.User{{Name: "ruleuser", Groups: []string{"adm"}}}
		j.Files = []job.File{{Path: "/etc/rule-file", Content: "generated\n"}}
	}
	return j
}

// jsonNorm makes values comparable across the two judge runs.
func jsonNorm(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// ruleMerge is the documented merge (the oracle, written from the rule, not
// from vmpayload's code): maps merge key by key, lists join with gen's
// items first, anything else takes user's value.
func ruleMerge(gen, user any) any {
	if user == nil {
		return gen
	}
	gm, ok1 := gen.(map[string]any)
	um, ok2 := user.(map[string]any)
	if ok1 && ok2 {
		out := map[string]any{}
		for k, v := range gm {
			out[k] = v
		}
		for k, uv := range um {
			if gv, ok := gm[k]; ok {
				out[k] = ruleMergeValue(gv, uv)
			} else {
				out[k] = uv
			}
		}
		return out
	}
	return user
}

func ruleMergeValue(gen, user any) any {
	gl, ok1 := gen.([]any)
	ul, ok2 := user.([]any)
	if ok1 && ok2 {
		return append(append([]any{}, gl...), ul...)
	}
	if _, ok := gen.(map[string]any); ok {
		if _, ok := user.(map[string]any); ok {
			return ruleMerge(gen, user)
		}
	}
	return user
}

func scriptsOf(u *judge.UserData) []string {
	if u == nil {
		return nil
	}
	var out []string
	for _, s := range u.Scripts {
		out = append(out, s.ContentType+"\n"+strings.TrimRight(s.Content, "\n"))
	}
	return out
}

// ruleCheck carries in in every carriage of cs, builds the images, has
// cloud-init read them (one judge run for all) and holds each to the rule.
// It returns, per carriage, the build's refusal (nil when carried), and
// fails t where validate and build disagree or the rule does not hold.
func ruleCheck(t *testing.T, in ruleInput, cs []carry) map[carry]error {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	inc := filepath.Join(dir, "includes")
	if err := os.Mkdir(inc, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range in.includes {
		if err := os.WriteFile(filepath.Join(inc, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refused := map[carry]error{}
	var built []carry
	var images [][]byte // rendered user-data per built carriage
	var paths []string
	for i, c := range cs {
		j := ruleJob(in, c)
		vr := j.Validate() // validate must agree with build
		r, err := payloadtest.Render(j, "", payload.Options{Salt: fixedSalt})
		refused[c] = err
		if err != nil {
			if vr.OK() {
				t.Errorf("%s: validate accepted what build refused: %v", c, err)
			}
			continue
		}
		if !vr.OK() {
			t.Errorf("%s: build accepted what validate refused: %v", c, vr.Err())
		}
		out := filepath.Join(dir, fmt.Sprintf("seed-%d%s", i, payload.Extension(c.media)))
		if _, err := r.Write(ctx, out, payload.Options{GID: -1}); err != nil {
			t.Fatal(err)
		}
		built, paths = append(built, c), append(paths, out)
		images = append(images, userDataFile(t, r.Docs.Files))
	}
	if len(built) == 0 {
		return refused
	}
	// the generated config alone, per format, for the merge oracle
	docs := [][]byte{in.data}
	for _, f := range []job.Format{job.FormatNoCloud, job.FormatConfigDrive} {
		gj := ruleJob(in, carry{format: f, media: job.MediaISO, mode: job.ModeMerge})
		gj.UserDataBase64 = ""
		gr, err := payloadtest.Render(gj, "", payload.Options{Salt: fixedSalt})
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, userDataFile(t, gr.Docs.Files))
	}
	opt := judge.Options{IncludesDir: inc, NoSchema: true}
	loaded, err := judge.LoadUserData(ctx, opt, docs...)
	if err != nil {
		t.Fatal(err)
	}
	reps, err := judge.JudgeMany(ctx, paths, opt)
	if err != nil {
		t.Fatal(err)
	}
	input := loaded[0]
	for k, v := range in.want {
		if g := jsonNorm(input.MergedCloudConfig[k]); !reflect.DeepEqual(g, jsonNorm(v)) {
			t.Errorf("cloud-init loads %s = %v from the input, want %v (errors %q)", k, g, v, input.Errors)
		}
	}
	for i, c := range built {
		rep := reps[i]
		gen := loaded[1]
		if c.format == job.FormatConfigDrive {
			gen = loaded[2]
		}
		if !rep.ValidSeed {
			t.Errorf("%s: cloud-init does not read the seed: %q", c, rep.AllErrors())
			continue
		}
		if c.mode == job.ModeReplace && !c.vendor && !bytes.Equal(images[i], in.data) {
			t.Errorf("%s: replace mode: user-data is not byte-identical to the input", c)
		}
		got := rep.UserData
		want := jsonNorm(input.MergedCloudConfig)
		if c.vendor {
			got = rep.VendorData
			if g, w := jsonNorm(rep.UserData.MergedCloudConfig), jsonNorm(gen.MergedCloudConfig); !reflect.DeepEqual(g, w) {
				t.Errorf("%s: user-data config %v, want the generated %v", c, g, w)
			}
		} else if c.mode == job.ModeMerge {
			want = ruleMerge(jsonNorm(gen.MergedCloudConfig), want)
		}
		if got == nil {
			t.Errorf("%s: cloud-init read no user-data/vendor-data", c)
			continue
		}
		if g := jsonNorm(got.MergedCloudConfig); !reflect.DeepEqual(g, want) {
			gb, _ := json.MarshalIndent(g, "", " ")
			wb, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("%s: cloud-init's config from the image:\n%s\nwant:\n%s", c, gb, wb)
		}
		if g, w := scriptsOf(got), scriptsOf(input); !reflect.DeepEqual(g, w) {
			t.Errorf("%s: scripts from the image %q, from the input %q", c, g, w)
		}
		if g, w := got.Includes, input.Includes; !reflect.DeepEqual(g, w) {
			t.Errorf("%s: includes from the image %q, from the input %q", c, g, w)
		}
		if len(got.Jinja) != len(input.Jinja) {
			t.Errorf("%s: %d jinja parts from the image, %d from the input", c, len(got.Jinja), len(input.Jinja))
		}
		if g, w := unknownOf(got), unknownOf(input); !reflect.DeepEqual(g, w) {
			t.Errorf("%s: other parts from the image %q, from the input %q", c, g, w)
		}
	}
	return refused
}

func unknownOf(u *judge.UserData) []string {
	var out []string
	for _, s := range u.Unknown {
		out = append(out, s.ContentType+"\n"+strings.TrimRight(s.Content, "\n"))
	}
	return out
}

// userDataFile returns the user-data document among files.
func userDataFile(t *testing.T, files []cloudinit.File) []byte {
	t.Helper()
	for _, f := range files {
		if f.Path == "user-data" || f.Path == "openstack/latest/user_data" {
			return f.Data
		}
	}
	t.Fatal("no user-data rendered")
	return nil
}

// ruleInputs are inputs of every class of issue 18.
func ruleInputs(t *testing.T) []ruleInput {
	mime := "Content-Type: multipart/mixed; boundary=\"MB\"\nMIME-Version: 1.0\n\n" +
		"--MB\nContent-Type: text/cloud-config\n\n#cloud-config\nruncmd: [echo mime-one]\nusers: [{name: mimeuser}]\n" +
		"--MB\nContent-Type: text/cloud-config\nMerge-Type: dict(recurse_array)+list(append)\n\n#cloud-config\nruncmd: [echo mime-two]\n" +
		"--MB\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho mime-script\n--MB--\n"
	yaml11 := "#cloud-config\nssh_pwauth: yes\nruncmd:\n  - echo user-runcmd\nwrite_files:\n  - path: /etc/u\n    content: !!binary |\n      aGVs\n      bG8=\n    permissions: 0644\nbootcmd: [echo on]\nx_flag: On\nx_num: 1_000\nx_oct: 0755\napt: {a: 1}\napt: {b: 2}\nx_time: 2001-12-14t21:59:43.10-05:00\nx_bin2: !!binary \"aGVs*bG8=\"\n"
	yaml11Want := map[string]any{"ssh_pwauth": true, "x_flag": true, "x_num": 1000, "x_oct": 493, "apt": map[string]any{"b": 2},
		"x_bin2": "hello", "bootcmd": []any{"echo on"}}
	mimeWant := map[string]any{"runcmd": []any{"echo mime-one", "echo mime-two"}}
	return []ruleInput{
		{name: "yaml11-scalars-and-duplicate-keys", data: []byte(yaml11), want: yaml11Want},
		{name: "gzip-cloud-config", data: testenv.Gzip(t, yaml11), want: yaml11Want},
		{name: "mbox-mime", data: []byte("From nobody Mon Nov 23 00:00:00 2026\n" + mime), want: mimeWant},
		{name: "mime-late-version-header", data: []byte(strings.Replace(mime, "MIME-Version: 1.0\n", "X-Note: mime-version: below\nMime-version: 1.0\n", 1)), want: mimeWant},
		{name: "gzip-mime", data: testenv.Gzip(t, mime), want: mimeWant},
		{name: "include-with-runcmd", data: []byte("#include\n" + judge.IncludePrefix + "inc.yaml\n"),
			includes: map[string]string{"inc.yaml": "#cloud-config\nruncmd: [echo included]\nusers: [default, {name: incuser}]\n"},
			want:     map[string]any{"runcmd": []any{"echo included"}}},
		{name: "include-once-mime", data: []byte("#include-once\n" + judge.IncludePrefix + "inc.mime\n"),
			includes: map[string]string{"inc.mime": mime}, want: mimeWant},
		{name: "archive", data: []byte("#cloud-config-archive\n- type: text/cloud-config\n  content: |\n    #cloud-config\n    runcmd: [echo archived]\n- content: |\n    #!/bin/sh\n    echo archived-script\n"),
			want: map[string]any{"runcmd": []any{"echo archived"}}},
		{name: "jinja-cloud-config", data: []byte("## template: jinja\n#cloud-config\nruncmd:\n  - echo {{ v1.local_hostname }}\nssh_pwauth: on\n"), want: map[string]any{"runcmd": []any{"echo judge-host"}, "ssh_pwauth": true}},
		{name: "mime-with-jinja-part", data: []byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=J\n\n--J\nContent-Type: text/jinja2\n\n## template: jinja\n#cloud-config\nruncmd: [echo {{ v1.instance_id }}]\n--J--\n"), want: map[string]any{"runcmd": []any{"echo judge-instance"}}},
		{name: "non-ascii-cloud-config", data: []byte("#cloud-config\nruncmd: [echo grüße 日本]\nx_text: naïve\n"),
			want: map[string]any{"runcmd": []any{"echo grüße 日本"}, "x_text": "naïve"}},
		{name: "non-ascii-script", data: []byte("#!/bin/sh\necho grüße\n")},
		{name: "script", data: []byte("#!/bin/sh\necho plain-script\n")},
		{name: "leading-space-and-case", data: []byte("\n  #Cloud-Config\nruncmd: [echo cased]\n"), want: map[string]any{"runcmd": []any{"echo cased"}}},
	}
}

// TestUserDataRule holds every class of input to the rule in every
// carriage (formats, media, modes, vendor-data).
func TestUserDataRule(t *testing.T) {
	if err := judge.CheckEnvironment(context.Background()); err != nil {
		t.Fatalf("the cloud-init judge cannot run here (make test installs it): %v", err)
	}
	for _, in := range ruleInputs(t) {
		in := in
		t.Run(in.name, func(t *testing.T) {
			t.Parallel()
			for c, err := range ruleCheck(t, in, allCarries()) {
				if err != nil {
					t.Errorf("%s: refused: %v", c, err)
				}
			}
		})
	}
}

// TestMetaDataAndNetworkWrapperJudged (the network-config matches no MAC:
// cloud-init would look the MAC up among the host's interfaces): meta-data keys in the other
// format's spelling reach cloud-init's reader of this format, and a
// network-config in a network: wrapper gives cloud-init 22.4 (which does
// not unwrap it) its network with YAML 1.1 booleans intact.
func TestMetaDataAndNetworkWrapperJudged(t *testing.T) {
	ctx := context.Background()
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAMmjD6jou8MNNJHmnk3ekQ6Tr9SBDqVj2q8F2+//2aG alice@example"
	jobs := []*job.Job{
		{Version: 1, Format: job.FormatConfigDrive, MetaData: map[string]any{"instance-id": "iid-nc-spelling", "local-hostname": "nc-spelled", "public-keys": []any{key}}},
		{Version: 1, Format: job.FormatNoCloud, MetaData: map[string]any{"uuid": "iid-os-spelling", "hostname": "os-spelled", "public_keys": map[string]any{"k0": key}}},
		{Version: 1, Format: job.FormatNoCloud, Media: job.MediaVFAT, NetworkConfig: "network:\n  version: 2\n  ethernets:\n    eth0:\n      dhcp4: yes\n      dhcp6: off\n"},
	}
	dir := t.TempDir()
	var paths []string
	for i, j := range jobs {
		j.Timezone = "UTC" // an empty #cloud-config draws a warning

		p := filepath.Join(dir, fmt.Sprintf("seed-%d.img", i))
		if _, err := payloadtest.Build(ctx, j, "", p, payload.Options{GID: -1}); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	reps, err := judge.JudgeMany(ctx, paths, judge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ iid, host string }{{"iid-nc-spelling", "nc-spelled"}, {"iid-os-spelling", "os-spelled"}} {
		r := reps[i]
		if !r.OK() || r.InstanceID != want.iid || r.Hostname != want.host || !reflect.DeepEqual(r.PublicKeys, []string{key}) {
			t.Errorf("%s: cloud-init read instance-id %q hostname %q keys %q (errors %q), want %q %q [key]",
				jobs[i].Format, r.InstanceID, r.Hostname, r.PublicKeys, r.AllErrors(), want.iid, want.host)
		}
	}
	r := reps[2]
	st, _ := json.Marshal(r.NetworkState)
	if !r.OK() || r.NetworkConfig["version"] != float64(2) || !strings.Contains(string(st), `"subnets":[{"routes":[],"type":"dhcp4"}]`) || !strings.Contains(string(st), `"dhcp6":false`) {
		t.Errorf("wrapped network-config: errors %q, config %v, state %s", r.AllErrors(), r.NetworkConfig, st)
	}
}
