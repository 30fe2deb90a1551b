package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ignconfig "github.com/coreos/ignition/v2/config"
	"github.com/vincent-petithory/dataurl"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/test/golden"
	"github.com/vmpayload/vmpayload/test/testenv"
)

const ignJob = `{"version":1,"format":"ignition",%s"hostname":"fcos1","timezone":"UTC",
	"users":[{"name":"core","password_hash":"` + testenv.HashA + `","ssh_authorized_keys":["` + testenv.KeyAlice + `"]}],
	"ignition":{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"hello.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]}}}`

// TestBuildAndInspectIgnition: build writes config.ign (fw_cfg) or an
// image holding the config; Ignition parses what was written; inspect
// shows a config's summary, of a .ign file or inside an image.
func TestBuildAndInspectIgnition(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, members, out, inside string
	}{
		{"fwcfg", "", "config.ign", ""},
		{"configdrive", `"ignition_delivery":"configdrive",`, "cd.iso", "openstack/latest/user_data"},
		{"nocloud", `"ignition_delivery":"nocloud","media":"vfat",`, "nc.img", "user-data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			jobFile := filepath.Join(dir, c.name+".json")
			if err := os.WriteFile(jobFile, []byte(strings.Replace(ignJob, "%s", c.members, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, c.out)
			code, stdout, stderr := runCLI(t, "build", "-o", out, jobFile)
			if code != 0 {
				t.Fatalf("build: exit %d %s", code, stderr)
			}
			if c.inside == "" && !strings.Contains(stdout, "ignition config (fw_cfg) spec=3.4.0") {
				t.Errorf("build said %q", stdout)
			}
			var raw []byte
			var err error
			if c.inside == "" {
				raw, err = os.ReadFile(out)
			} else {
				_, s, _ := runCLI(t, "inspect", "--cat", c.inside, out)
				raw = []byte(s)
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, rpt, err := ignconfig.Parse(raw); err != nil || len(rpt.Entries) != 0 {
				t.Fatalf("config.Parse: %v %s", err, rpt.String())
			}
			code, stdout, stderr = runCLI(t, "inspect", out)
			if code != 0 {
				t.Fatalf("inspect: exit %d %s", code, stderr)
			}
			for _, want := range []string{"ignition spec: 3.4.0", "/etc/hostname", "/etc/localtime -> /usr/share/zoneinfo/UTC", "core", "merges [0]: data: URL", "hello.service"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("inspect lacks %q:\n%s", want, stdout)
				}
			}
			code, stdout, _ = runCLI(t, "inspect", "--json", out)
			var got struct {
				Ignition struct {
					Spec   string
					Merged []struct{ Summary struct{ Units []string } }
				}
			}
			if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != 0 || got.Ignition.Spec != "3.4.0" ||
				len(got.Ignition.Merged) != 1 || len(got.Ignition.Merged[0].Summary.Units) != 1 {
				t.Errorf("inspect --json: exit %d %v %s", code, err, stdout)
			}
		})
	}
	// a file that is neither an image nor an Ignition config
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte(`{"version":1}`), 0o600)
	if code, _, stderr := runCLI(t, "inspect", junk); code == 0 || !strings.Contains(stderr, "not a readable") {
		t.Errorf("junk: exit %d %q", code, stderr)
	}
}

// TestRunIgnitionFlags: --ignition puts the user's config into the job
// as the ignition object (format ignition implied); Ignition's refusal
// of it names the flag and Ignition's JSON path.
func TestRunIgnitionFlags(t *testing.T) {
	runFixtures(t)
	os.WriteFile("good.ign", []byte(`{"ignition":{"version":"3.6.0"},"storage":{"files":[{"path":"/etc/x","mode":420}]}}`), 0o600)
	os.WriteFile("bad.ign", []byte(`{"ignition":{"version":"3.6.0"},"storage":{"files":[{"path":"etc/x"}]}}`), 0o600)
	code, out, stderr := runJob(t, "", "--ignition", "good.ign", "--ignition-delivery", "configdrive", "--hostname", "n1", "dom1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var j struct {
		Format           string
		IgnitionDelivery string `json:"ignition_delivery"`
		Ignition         map[string]any
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if j.Format != "ignition" || j.IgnitionDelivery != "configdrive" || j.Ignition["storage"] == nil {
		t.Errorf("job %s", out)
	}
	wantRunRefused(t, "bad config", "--ignition bad.ign: ignition.storage.files[0].path: Ignition refuses the config: path not absolute", "--ignition", "bad.ign", "--ignition-delivery", "nocloud", "dom1")
	wantRunRefused(t, "--detach", "--detach", "--ignition", "good.ign", "--detach", "dom1")
}

// TestRunButaneFlag: --butane puts the Butane config into the job as its
// butane text (format ignition implied); Butane's refusal of it names the
// flag, the field and Butane's YAML path and line; --butane and
// --ignition together are refused.
func TestRunButaneFlag(t *testing.T) {
	runFixtures(t)
	good := "variant: fcos\nversion: 1.6.0\nstorage:\n  files:\n    - path: /etc/x\n      contents:\n        inline: x\n"
	os.WriteFile("good.bu", []byte(good), 0o600)
	os.WriteFile("bad.bu", []byte("variant: fcos\nversion: 1.6.0\nstorage:\n  files:\n    - path: /etc/x\n      contents:\n        local: x.txt\n"), 0o600)
	os.WriteFile("good.ign", []byte(`{"ignition":{"version":"3.6.0"}}`), 0o600)
	code, out, stderr := runJob(t, "", "--butane", "good.bu", "--ignition-delivery", "configdrive", "dom1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var j struct {
		Format, Butane string
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if j.Format != "ignition" || j.Butane != good {
		t.Errorf("job %s", out)
	}
	wantRunRefused(t, "bad config", "--butane bad.bu: butane: Butane refuses the config (at $.storage.files.0.contents.local, line 7, column 16)", "--butane", "bad.bu", "--ignition-delivery", "nocloud", "dom1")
	wantRunRefused(t, "both", "use only one of --ignition and --butane", "--butane", "good.bu", "--ignition", "good.ign", "dom1")
	wantRunRefused(t, "--detach", "--butane has nothing to do with it", "--butane", "good.bu", "--detach", "dom1")
}

// TestBuildButane: `vmpayload build` of a job with a butane field writes
// config.ign, which Ignition's config.Parse reads without a warning and
// whose merged config is the translated Butane config; the golden
// testdata/butane-config.ign is the file written; inspect shows the
// summary of what the Butane config says.
func TestBuildButane(t *testing.T) {
	dir := t.TempDir()
	jobFile := filepath.Join(dir, "job.json")
	src := "variant: fcos\nversion: 1.6.0\nsystemd:\n  units:\n    - name: butane-hello.service\n      enabled: true\n      contents: |\n        [Service]\n        ExecStart=/bin/true\n        [Install]\n        WantedBy=multi-user.target\n"
	b, _ := json.Marshal(src)
	doc := `{"version":1,"format":"ignition","hostname":"fcos1","users":[{"name":"core","password_hash":"` + testenv.HashA + `"}],"butane":` + string(b) + `}`
	if err := os.WriteFile(jobFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "config.ign")
	code, stdout, stderr := runCLI(t, "build", "-o", out, jobFile)
	if code != 0 || !strings.Contains(stdout, "ignition config (fw_cfg) spec=3.5.0") {
		t.Fatalf("build: exit %d %s %s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cfg, rpt, err := ignconfig.Parse(raw)
	if err != nil || len(rpt.Entries) != 0 {
		t.Fatalf("config.Parse: %v %s", err, rpt.String())
	}
	translated, problems := job.TranslateButane(src)
	if len(problems) > 0 || len(cfg.Ignition.Config.Merge) != 1 {
		t.Fatalf("Butane: %v; merges %d", problems, len(cfg.Ignition.Config.Merge))
	}
	if du, err := dataurl.DecodeString(*cfg.Ignition.Config.Merge[0].Source); err != nil || string(du.Data) != string(translated) {
		t.Errorf("the merged config is not Butane's translation: %v", err)
	}
	golden.Compare(t, filepath.Join("testdata", "butane-config.ign"), raw, *update)
	code, stdout, stderr = runCLI(t, "inspect", out)
	if code != 0 || !strings.Contains(stdout, "butane-hello.service") || !strings.Contains(stdout, "ignition spec: 3.5.0") {
		t.Errorf("inspect: exit %d %s %s", code, stdout, stderr)
	}
	// a bad Butane config is refused by validate, by field
	bad := strings.Replace(doc, `version: 1.6.0`, `version: 1.8.0-experimental`, 1)
	os.WriteFile(jobFile, []byte(bad), 0o600)
	code, stdout, stderr = runCLI(t, "validate", jobFile)
	if code == 0 || !strings.Contains(stdout+stderr, "butane: Butane refuses the config (at $.version, line 2, column 10): version 1.8.0-experimental of variant fcos is experimental") {
		t.Errorf("validate: exit %d %s %s", code, stdout, stderr)
	}
}

// wantRunRefused runs `vmpayload run` with args and fails t (the case
// named what) unless it exits non-zero saying want on stderr.
func wantRunRefused(t *testing.T, what, want string, args ...string) {
	t.Helper()
	if code, _, stderr := runJob(t, "", args...); code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("%s: exit %d %q", what, code, stderr)
	}
}
