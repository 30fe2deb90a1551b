package guestreport

import (
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// Status documents as cloud-init 22.4 (Debian 12) and 25.1 (Debian 13)
// print them with `cloud-init status --format json` (trimmed to the fields
// that matter, on one line as the reporter sends them).
const (
	st224Done  = `{"_schema_version": "1", "boot_status_code": "enabled-by-generator", "datasource": "nocloud", "detail": "DataSourceNoCloud [seed=/dev/sr0][dsmode=net]", "errors": [], "last_update": "Thu, 01 Jan 1970 00:01:10 +0000", "status": "done"}`
	st224Error = `{"_schema_version": "1", "datasource": "nocloud", "errors": ["('scripts-user', RuntimeError('Runparts: 1 failures (runcmd) in 1 attempted commands'))"], "status": "error"}`
	st251Deg   = `{"boot_status_code": "enabled-by-generator", "datasource": "nocloud", "errors": [], "extended_status": "degraded done", "recoverable_errors": {"WARNING": ["cloud-config failed schema validation! You may run 'sudo cloud-init schema --system' to check the details."], "DEPRECATED": ["x is deprecated"]}, "status": "done"}`
	st251Error = `{"datasource": "configdrive", "errors": ["('scripts_user', RuntimeError('Runparts: 1 failures (runcmd) in 1 attempted commands'))"], "extended_status": "error - done", "recoverable_errors": {}, "status": "error"}`
	st251Done  = `{"datasource": "nocloud", "errors": [], "extended_status": "done", "recoverable_errors": {}, "status": "done"}`
	result224  = `{"v1": {"datasource": "DataSourceNoCloud [seed=/dev/sr0][dsmode=net]", "errors": []}}`
)

func line(status, result string, exit int) string {
	if status == "" {
		status = "null"
	}
	if result == "" {
		result = "null"
	}
	return `{"vmpayload_guest_report":1,"instance_id":"iid-1","boot_id":"b-1","uptime_seconds":71.5,"cloud_init_version":"22.4.2","status_exit":` +
		string(rune('0'+exit)) + `,"status":` + status + `,"result":` + result + `}`
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, line          string
		status, datasource  string
		errors, recoverable []string
	}{
		{"22.4 done", line(st224Done, result224, 0), StatusDone, "nocloud", []string{}, []string{}},
		{"22.4 error", line(st224Error, result224, 1), StatusError, "nocloud", []string{"('scripts-user', RuntimeError('Runparts: 1 failures (runcmd) in 1 attempted commands'))"}, []string{}},
		{"25.1 degraded", line(st251Deg, "", 2), StatusDegraded, "nocloud", []string{}, []string{"DEPRECATED: x is deprecated", "WARNING: cloud-config failed schema validation! You may run 'sudo cloud-init schema --system' to check the details."}},
		{"25.1 error", line(st251Error, "", 1), StatusError, "configdrive", []string{"('scripts_user', RuntimeError('Runparts: 1 failures (runcmd) in 1 attempted commands'))"}, []string{}},
		{"25.1 done", line(st251Done, "", 0), StatusDone, "nocloud", []string{}, []string{}},
		{"disabled", line(`{"status": "disabled", "errors": []}`, "", 0), StatusDisabled, "", []string{}, []string{}},
		{"no status document", line("", result224, 1), StatusError, "DataSourceNoCloud [seed=/dev/sr0][dsmode=net]", []string{"the guest's cloud-init gave no status document"}, []string{}},
		{"still running", line(`{"status": "running", "errors": []}`, "", 0), StatusRunning, "", []string{}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.line))
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tc.status || r.Datasource != tc.datasource || r.InstanceID != "iid-1" || r.BootID != "b-1" || r.UptimeSeconds != 71.5 || r.CloudInitVersion != "22.4.2" {
				t.Errorf("got %+v, want status %q datasource %q", r, tc.status, tc.datasource)
			}
			if !reflect.DeepEqual(r.Errors, tc.errors) || !reflect.DeepEqual(r.RecoverableErrors, tc.recoverable) {
				t.Errorf("errors %q recoverable %q, want %q %q", r.Errors, r.RecoverableErrors, tc.errors, tc.recoverable)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for name, l := range map[string]string{
		"not json":      "hello",
		"other version": `{"vmpayload_guest_report":2}`,
		"no version":    `{"instance_id":"x"}`,
		"too long":      `{"vmpayload_guest_report":1,"instance_id":"` + strings.Repeat("x", MaxLine) + `"}`,
	} {
		if _, err := Parse([]byte(l)); !errors.Is(err, ErrNotReport) {
			t.Errorf("%s: err %v, want ErrNotReport", name, err)
		}
	}
	if _, err := Parse([]byte(`{"vmpayload_guest_report":1,"status":"done"}`)); err == nil {
		t.Errorf("a status that is not cloud-init's document was accepted")
	}
}

// TestReporterShell checks the reporter with sh -n and dash -n, and runs
// its JSON helpers under dash: what they print must parse as the report.
func TestReporterShell(t *testing.T) {
	for _, sh := range []string{"sh", "dash"} {
		if _, err := exec.LookPath(sh); err != nil {
			t.Fatalf("%s not installed: %v", sh, err)
		}
		cmd := exec.Command(sh, "-n")
		cmd.Stdin = strings.NewReader(Boothook())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", sh, err, out)
		}
	}
	if !strings.HasPrefix(Boothook(), "#cloud-boothook\n#!/bin/sh\n") {
		t.Errorf("the reporter does not start with the boothook marker and a shebang")
	}
	if !strings.Contains(Boothook(), "/dev/virtio-ports/"+Channel) {
		t.Errorf("the reporter does not write to %s", Channel)
	}
	// json_str and json_doc, taken from the script, under dash.
	funcs := extract(t, Boothook(), "json_str") + extract(t, Boothook(), "json_doc")
	dir := t.TempDir()
	script := funcs + `
printf '{"status": "done",\n "errors": []}\n' >` + dir + `/st.json
printf '{"vmpayload_guest_report":1,"instance_id":%s,"boot_id":%s,"uptime_seconds":1.5,"cloud_init_version":"25.1","status_exit":0,"status":%s,"result":%s}\n' \
	"$(json_str 'i-"q\uo\te')" "$(json_str "$(printf 'two\nlines\tand tab')")" "$(json_doc ` + dir + `/st.json)" "$(json_doc ` + dir + `/missing)"
`
	out, err := exec.Command("dash", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("dash: %v\n%s", err, out)
	}
	r, err := Parse([]byte(strings.TrimSpace(string(out))))
	if err != nil {
		t.Fatalf("the helpers' line does not parse: %v\n%s", err, out)
	}
	if r.InstanceID != `i-"q\uo\te` || r.BootID != "two\nlines\tand tab" || r.Status != StatusDone {
		t.Errorf("round trip: %+v", r)
	}
}

func extract(t *testing.T, script, fn string) string {
	t.Helper()
	i := strings.Index(script, "\n"+fn+"() {")
	if i < 0 {
		t.Fatalf("no function %s in the reporter", fn)
	}
	j := strings.Index(script[i:], "\n}\n")
	return script[i:i+j+3] + "\n"
}
