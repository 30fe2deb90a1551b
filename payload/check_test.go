package payload

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestCheck: one report of every problem, by field, with the secrets
// resolved and never quoted.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	const content = "topsecret-content"
	testenv.WriteFiles(t, dir, map[string]string{"pw": content + "\n", "empty": "\n", "notakey": content + "\n"})
	agent := CheckOptions{Secrets: true, SecretsDir: dir, Agent: true}
	offline := CheckOptions{}
	on := true
	reportOn := CheckOptions{Defaults: job.Defaults{GuestReport: &on}, Agent: true}
	const vendorOff = `"user_data_mode":"replace","user_data":"#cloud-config\nvendor_data: {enabled: false}\n"`
	for _, c := range []struct {
		name string
		doc  string
		opt  CheckOptions
		want []string
	}{
		{"resolvable secret", `{"version":1,"domain":"d","users":[{"name":"a","password_secret":"pw"}]}`, agent, nil},
		{"missing secret", `{"version":1,"domain":"d","users":[{"name":"a","password_secret":"nope"}]}`, agent, []string{"users[0].password_secret|not_found"}},
		{"empty secret", `{"version":1,"domain":"d","users":[{"name":"a","password_secret":"empty"}]}`, agent, []string{"users[0].password_secret|invalid"}},
		{"secrets not resolved offline", `{"version":1,"users":[{"name":"a","password_secret":"nope"}]}`, offline, nil},
		{"no secrets directory", `{"version":1,"domain":"d","user_data_secret":"x"}`, CheckOptions{Secrets: true, Agent: true}, []string{"user_data_secret|not_found"}},
		{"host key secret that is no key", `{"version":1,"domain":"d","ssh_host_keys":[{"type":"ed25519","private_key_secret":"notakey"}]}`, agent, []string{"ssh_host_keys[0].private_key_secret|invalid"}},
		{"agent needs a domain", `{"version":1}`, agent, []string{"domain|required"}},
		{"offline needs none", `{"version":1}`, offline, nil},
		{"every problem at once", `{"version":1,"hostname":"-x-","users":[{"name":"a","password_secret":"nope"}]}`, agent,
			[]string{"domain|required", "hostname|invalid", "users[0].password_secret|not_found"}},
		{"detach resolves nothing", `{"version":1,"domain":"d","action":"detach","user_data_secret":"nope"}`, agent, nil},
		{"agent's guest report meets replace mode turning vendor-data off", `{"version":1,"domain":"d",` + vendorOff + `}`, reportOn, []string{"guest_report|conflict"}},
		{"job's guest_report false wins over the agent's", `{"version":1,"domain":"d","guest_report":false,` + vendorOff + `}`, reportOn, nil},
		{"offline: no guest report unless the job asks", `{"version":1,` + vendorOff + `}`, offline, nil},
		{"offline: the job asks", `{"version":1,"guest_report":true,` + vendorOff + `}`, offline, []string{"guest_report|conflict"}},
		{"default format applies", `{"version":1,"domain":"d","network_config":"version: 2\nethernets: {}\n"}`,
			CheckOptions{Defaults: job.Defaults{Format: job.FormatConfigDrive}, Agent: true}, []string{"network_config|conflict"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, _, r := Check([]byte(c.doc), c.opt)
			if got := fieldCodes(r.Errors); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Check: %q, want %q", got, c.want)
			}
			for _, e := range r.Errors {
				if strings.Contains(e.Message, content) {
					t.Errorf("%s quotes the secret: %s", e.Field, e.Message)
				}
			}
			// CheckJob on the decoded job says the same
			if j != nil {
				if _, r := CheckJob(j, c.opt); !reflect.DeepEqual(fieldCodes(r.Errors), c.want) {
					got := fieldCodes(r.Errors)
					t.Errorf("CheckJob: %q, want %q", got, c.want)
				}
			}
		})
	}
}

// TestChecked: Check hands out a job to render only when it passed with its
// secrets resolved and has something to render, with its defaults applied;
// the renderer takes nothing else.
func TestChecked(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := CheckOptions{Defaults: job.Defaults{Format: job.FormatConfigDrive}, Secrets: true, SecretsDir: dir, Agent: true}
	build := CheckOptions{Secrets: true, SecretsDir: dir, Build: true}
	for _, c := range []struct {
		name    string
		doc     string
		opt     CheckOptions
		checked bool
	}{
		{"agent job with a secret", `{"version":1,"domain":"d","users":[{"name":"a","password_secret":"pw"}]}`, agent, true},
		{"secrets not resolved", `{"version":1,"hostname":"h"}`, CheckOptions{}, false},
		{"invalid field", `{"version":1,"domain":"d","hostname":"-x-"}`, agent, false},
		{"missing secret", `{"version":1,"domain":"d","user_data_secret":"nope"}`, agent, false},
		{"detach on the agent", `{"version":1,"domain":"d","action":"detach"}`, agent, false},
		{"prebuilt on the agent", `{"version":1,"domain":"d","prebuilt_image":"/x.iso"}`, agent, false},
		{"detach built offline", `{"version":1,"action":"detach","hostname":"h"}`, build, true},
		{"host key secret that is no key", `{"version":1,"ssh_host_keys":[{"type":"ed25519","private_key_secret":"pw"}]}`, build, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, ch, r := Check([]byte(c.doc), c.opt)
			if (ch != nil) != c.checked {
				t.Fatalf("Check gave a checked job %v, want %v (report %v)", ch != nil, c.checked, r.Errors)
			}
			if ch2, _ := CheckJob(j, c.opt); (ch2 != nil) != c.checked {
				t.Errorf("CheckJob gave a checked job %v, want %v", ch2 != nil, c.checked)
			}
			if ch == nil {
				return
			}
			if !r.OK() {
				t.Errorf("checked job with problems %v", r.Errors)
			}
			if got, want := ch.in.Job, j.Apply(c.opt.Defaults); !reflect.DeepEqual(got, want) {
				t.Errorf("checked job %+v, want the job with defaults %+v", got, want)
			}
			if _, err := Render(ch, Options{}); err != nil {
				t.Errorf("a checked job does not render: %v", err)
			}
		})
	}
}

func fieldCodes(errs []job.FieldError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+"|"+e.Code)
	}
	sort.Strings(out)
	return out
}

// BenchmarkCheck compares the agent's check of a job (fields, secrets and a
// render in memory) with the field validation alone it replaced at POST
// and intake; report the ratio of the two, measured in the same run.
func BenchmarkCheck(b *testing.B) {
	data, err := os.ReadFile("../configs/examples/02-full-nocloud.json")
	if err != nil {
		b.Fatal(err)
	}
	doc := string(data) // names its domain
	opt := CheckOptions{Secrets: true, SecretsDir: b.TempDir(), Agent: true}
	if _, _, r := Check([]byte(doc), opt); !r.OK() {
		b.Fatalf("example does not pass the check: %v", r.Err())
	}
	b.Run("parse", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			job.Parse([]byte(doc))
		}
	})
	b.Run("check", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Check([]byte(doc), opt)
		}
	})
}

// TestCheckWindowsSecrets: the administrator password and Windows
// user-data read from secrets are checked by field, never quoted.
func TestCheckWindowsSecrets(t *testing.T) {
	dir := t.TempDir()
	const pw = "Adm1n!secret-pw"
	testenv.WriteFiles(t, dir, map[string]string{
		"pw": pw + "\r\n", "empty": "\n", "twolines": pw + "\nsecond\n",
		"ps1": "#ps1_sysnative\nWrite-Host " + pw + "\n", "junk": "Write-Host " + pw + "\n",
	})
	agent := CheckOptions{Secrets: true, SecretsDir: dir, Agent: true}
	win := func(members string) string {
		return `{"version":1,"domain":"d","guest_os":"windows","format":"configdrive",` + members + `}`
	}
	for _, c := range []struct {
		name string
		doc  string
		want []string
	}{
		{"password", win(`"admin_password_secret":"pw"`), nil},
		{"missing password", win(`"admin_password_secret":"nope"`), []string{"admin_password_secret|not_found"}},
		{"empty password", win(`"admin_password_secret":"empty"`), []string{"admin_password_secret|invalid"}},
		{"two-line password", win(`"admin_password_secret":"twolines"`), []string{"admin_password_secret|invalid"}},
		{"script secret replace", win(`"user_data_secret":"ps1","user_data_mode":"replace"`), nil},
		{"script secret merge", win(`"user_data_secret":"ps1"`), []string{"user_data_secret|conflict"}},
		{"unknown secret user data", win(`"user_data_secret":"junk","user_data_mode":"replace"`), []string{"user_data_secret|invalid"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, checked, r := Check([]byte(c.doc), agent)
			if got := fieldCodes(r.Errors); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Check: %q, want %q", got, c.want)
			}
			for _, e := range r.Errors {
				if strings.Contains(e.Message, pw) {
					t.Errorf("%s quotes the secret: %s", e.Field, e.Message)
				}
			}
			if c.want == nil && checked == nil {
				t.Errorf("a good job was not checked")
			}
		})
	}
	// the password reaches meta_data.json as it is, without the line end
	_, checked, r := Check([]byte(win(`"admin_password_secret":"pw"`)), agent)
	if !r.OK() {
		t.Fatal(r.Err())
	}
	rd, err := Render(checked, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rd.Docs.Files {
		if f.Path == "openstack/latest/meta_data.json" && !strings.Contains(string(f.Data), `"admin_pass": "`+pw+`"`) {
			t.Errorf("meta_data.json has no admin_pass %q:\n%s", pw, f.Data)
		}
	}
}
