package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/engine"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	pjob "github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestOneCheckEverywhere feeds every kind of job the engine fails with
// invalid_job through `vmpayload validate --secrets-dir`, `vmpayload
// build`, POST /v1/jobs of a running agent and the engine itself, and
// expects the same fields from all four: what validate and the API accept
// is what build and the agent build (issue 15). The agent and the CLI are
// the real binary; the engine runs in-process on the libvirt test driver
// (every job here fails before a domain is looked up).
func TestOneCheckEverywhere(t *testing.T) {
	needLibvirtd(t)
	a := newAgent(t, "test:///default")
	secretsDir := filepath.Join(a.Dir, "secrets")
	if err := os.MkdirAll(secretsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	testenv.WriteFiles(t, secretsDir, map[string]string{"pw": "s3cret\n", "empty": "", "ud-bad": "#cloud-config\nruncmd: [unclosed\n", "ud-runcmd-str": "#cloud-config\nruncmd: echo user\n", "notakey": "not a key\n", "ud-vendor-off": "#cloud-config\nvendor_data: {enabled: false}\n"})
	a.start()
	host, err := libvirtx.OpenHost("test:///default", libvirtx.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	// guest_report on: the agent's default (config guest_report)
	eng := &engine.Engine{Host: host, PayloadDir: filepath.Join(a.Dir, "engine-payload"), SecretsDir: secretsDir, ImageGID: -1, GuestReport: true}

	const dom = "vmpx-check-none"
	cases := []struct {
		name string
		job  map[string]any
		want []string
		// agentOnly: build and validate do not need a domain.
		agentOnly bool
		// agentDefault: only the agent's defaults (guest_report on) make
		// the job invalid; build and validate do not apply them.
		agentDefault bool
	}{
		{"configdrive with network_config", map[string]any{"format": "configdrive", "network_config": "version: 2\nethernets: {}\n"}, []string{"network_config"}, false, false},
		{"replace mode with runcmd", map[string]any{"user_data_mode": "replace", "user_data": "#!/bin/sh\necho hi\n", "runcmd": []any{"echo lost"}}, []string{"user_data_mode"}, false, false},
		{"replace mode with random_seed, default format", map[string]any{"user_data_mode": "replace", "user_data": "#!/bin/sh\ntrue\n", "random_seed": map[string]any{"generate_bytes": 64}}, []string{"user_data_mode"}, false, false},
		{"network_data with the default format", map[string]any{"network_data": map[string]any{"links": []any{map[string]any{"id": "eth0", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:56"}}}}, []string{"network_data"}, false, false},
		{"missing password secret", map[string]any{"users": []any{map[string]any{"name": "alice", "password_secret": "nope"}}}, []string{"users[0].password_secret"}, false, false},
		{"empty password secret", map[string]any{"users": []any{map[string]any{"name": "alice", "password_secret": "empty"}}}, []string{"users[0].password_secret"}, false, false},
		{"missing user_data_secret", map[string]any{"user_data_secret": "nope"}, []string{"user_data_secret"}, false, false},
		{"broken user_data_secret", map[string]any{"user_data_secret": "ud-bad"}, []string{"user_data_secret"}, false, false},
		{"user_data_secret runcmd no list against the job's runcmd", map[string]any{"user_data_secret": "ud-runcmd-str", "runcmd": []any{"echo job"}}, []string{"user_data"}, false, false},
		{"inline runcmd no list against the job's runcmd", map[string]any{"user_data": "#cloud-config\nruncmd: echo user\n", "runcmd": []any{"echo job"}}, []string{"user_data"}, false, false},
		{"meta_data with two instance-ids", map[string]any{"meta_data": map[string]any{"instance-id": "a", "uuid": "b"}}, []string{"meta_data.uuid"}, false, false},
		{"missing host key secret", map[string]any{"ssh_host_keys": []any{map[string]any{"type": "ed25519", "private_key_secret": "nope"}}}, []string{"ssh_host_keys[0].private_key_secret"}, false, false},
		{"host key secret that is no key", map[string]any{"ssh_host_keys": []any{map[string]any{"type": "ed25519", "private_key_secret": "notakey"}}}, []string{"ssh_host_keys[0].private_key_secret"}, false, false},
		{"two problems at once", map[string]any{"hostname": "-bad-", "users": []any{map[string]any{"name": "alice", "password_secret": "nope"}}}, []string{"hostname", "users[0].password_secret"}, false, false},
		{"guest report in replace mode, inline user-data turns vendor-data off", map[string]any{"guest_report": true, "user_data_mode": "replace", "user_data": "#cloud-config\nvendor_data: {enabled: false}\n"}, []string{"guest_report"}, false, false},
		{"guest report in replace mode, user_data_secret turns vendor-data off", map[string]any{"guest_report": true, "user_data_mode": "replace", "user_data_secret": "ud-vendor-off"}, []string{"guest_report"}, false, false},
		{"no domain", map[string]any{"hostname": "h"}, []string{"domain"}, true, false},
		{"windows: missing administrator password secret", map[string]any{"guest_os": "windows", "format": "configdrive", "admin_password_secret": "nope"}, []string{"admin_password_secret"}, false, false},
		{"windows: empty administrator password secret, long host name", map[string]any{"guest_os": "windows", "format": "configdrive", "admin_password_secret": "empty", "hostname": "a-sixteen-chars0"}, []string{"admin_password_secret", "hostname"}, false, false},
		{"windows: a script in merge mode", map[string]any{"guest_os": "windows", "format": "configdrive", "user_data": "#ps1_sysnative\nWrite-Host hi\n"}, []string{"user_data"}, false, false},
		{name: "the agent's guest report in replace mode, user-data turns vendor-data off", job: map[string]any{"user_data_mode": "replace", "user_data": "#cloud-config\nvendor_data: {enabled: false}\n"},
			want: []string{"guest_report"}, agentDefault: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := map[string]any{"version": 1, "domain": dom}
			for k, v := range c.job {
				j[k] = v
			}
			if c.agentOnly {
				delete(j, "domain")
			}
			data, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			jobFile := filepath.Join(t.TempDir(), "job.json")
			if err := os.WriteFile(jobFile, data, 0o600); err != nil {
				t.Fatal(err)
			}

			// the engine: the reference
			pj, _ := pjob.Parse(data)
			if pj == nil {
				t.Fatal("the job does not decode")
			}
			res, err := eng.Run(context.Background(), pj, result.Result{ID: "check"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Error == nil || res.Error.Code != result.CodeInvalidJob {
				t.Fatalf("engine: result %+v, want invalid_job", res.Error)
			}
			assertFields(t, "engine", fieldsOf(res.Errors), c.want)

			// POST /v1/jobs: 400 with the same fields, nothing queued
			ans, status, err := a.Client().Submit(context.Background(), data)
			if err != nil {
				t.Fatal(err)
			}
			if status != http.StatusBadRequest {
				t.Errorf("POST /v1/jobs answered %d, want 400", status)
			}
			assertFields(t, "POST /v1/jobs", fieldsOf(ans.Errors), c.want)

			if c.agentOnly || c.agentDefault {
				return
			}
			// vmpayload validate --json --secrets-dir
			out, _ := exec.Command(a.Bin, "validate", "--json", "--secrets-dir", secretsDir, jobFile).Output()
			var v struct {
				Valid  bool              `json:"valid"`
				Errors []pjob.FieldError `json:"errors"`
			}
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("validate --json printed %q: %v", out, err)
			}
			assertFields(t, "validate", fieldsOf(v.Errors), c.want)

			// vmpayload build: refuses with the same fields, writes nothing
			img := filepath.Join(t.TempDir(), "out.iso")
			var stderr bytes.Buffer
			cmd := exec.Command(a.Bin, "build", "--secrets-dir", secretsDir, "-o", img, jobFile)
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil {
				t.Fatalf("build succeeded")
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
				f, _, ok := strings.Cut(l, ": ")
				if !ok {
					t.Fatalf("build printed %q, not field: message", l)
				}
				got = append(got, f)
			}
			assertFields(t, "build", got, c.want)
			if _, err := os.Stat(img); !os.IsNotExist(err) {
				t.Errorf("build left %s behind (%v)", img, err)
			}
		})
	}
}

func fieldsOf(errs []pjob.FieldError) []string {
	var f []string
	for _, e := range errs {
		f = append(f, e.Field)
	}
	return f
}

// assertFields compares the set of fields; "two problems at once" wants
// the secret field too, which only a check that resolves secrets next to
// the job's own fields reports.
func assertFields(t *testing.T, who string, got, want []string) {
	t.Helper()
	g := append([]string(nil), got...)
	sort.Strings(g)
	w := append([]string(nil), want...)
	sort.Strings(w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s reports fields %q, want %q", who, g, w)
	}
}
