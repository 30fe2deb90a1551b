package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ignconfig "github.com/coreos/ignition/v2/config"
)

const ignJob = `{"version":1,"format":"ignition",%s"hostname":"fcos1","timezone":"UTC",
	"users":[{"name":"core","password_hash":"` + testHash + `","ssh_authorized_keys":["` + testKey + `"]}],
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
	code, _, stderr = runJob(t, "", "--ignition", "bad.ign", "--ignition-delivery", "nocloud", "dom1")
	if code == 0 || !strings.Contains(stderr, "--ignition bad.ign: ignition.storage.files[0].path: Ignition refuses the config: path not absolute") {
		t.Errorf("bad config: exit %d %q", code, stderr)
	}
	code, _, stderr = runJob(t, "", "--ignition", "good.ign", "--detach", "dom1")
	if code == 0 || !strings.Contains(stderr, "--detach") {
		t.Errorf("--detach: exit %d %q", code, stderr)
	}
}
