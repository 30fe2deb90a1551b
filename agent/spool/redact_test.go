package spool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
)

// secretJobDoc is a failed job as a tenant wrote it: plaintext and hashed
// passwords, a Windows administrator password in meta_data, a generated
// seed's data, and the secret names (kept: they are names, not secrets).
const secretJobDoc = `{"version":1,"id":"f1","domain":"vm",
  "users":[{"name":"a","password":"Plain-Pw-1","password_secret":"pw-name"},
           {"name":"b","password_hash":"$6$salt$HASHED-PW-2"}],
  "meta_data":{"admin_pass":"Admin-Pw-3","note":"keep me"},
  "user_data":"#cloud-config\nchpasswd: {expire: false}\n",
  "random_seed":{"data":"U0VFRC1EQVRBLTQ="},
  "bad_field":1}`

// TestFailedJobKeptWithoutPasswords: failed/ID.job.json keeps the job for
// debugging without its passwords, hashes or seed; a job that does not even
// parse is redacted too.
func TestFailedJobKeptWithoutPasswords(t *testing.T) {
	for _, c := range []struct{ name, doc string }{
		{"valid JSON", secretJobDoc},
		{"broken JSON", secretJobDoc[:len(secretJobDoc)-1] + `,"users":[{"password":"Broken-Pw-5"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			if err := s.Put("f1", []byte(c.doc)); err != nil {
				t.Fatal(err)
			}
			cl, err := s.Claim("f1.json")
			if err != nil {
				t.Fatal(err)
			}
			r := result.Result{ID: "f1", State: result.StateFailed}
			r.Fail(result.CodeLibvirt, "bad_field: unknown", "")
			if err := s.Complete(cl, r); err != nil {
				t.Fatal(err)
			}
			kept, err := os.ReadFile(filepath.Join(s.Dir(Failed), "f1.job.json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, secret := range []string{"Plain-Pw-1", "HASHED-PW-2", "Admin-Pw-3", "U0VFRC1EQVRBLTQ=", "Broken-Pw-5"} {
				if strings.Contains(string(kept), secret) {
					t.Errorf("the kept failed job holds %q:\n%s", secret, kept)
				}
			}
			for _, keep := range []string{`"password_secret":"pw-name"`, `"note":"keep me"`, `"bad_field":1`, "chpasswd", `"password":"` + Redacted + `"`} {
				if !strings.Contains(string(kept), keep) {
					t.Errorf("the kept failed job lost %q:\n%s", keep, kept)
				}
			}
			if c.name == "valid JSON" && !json.Valid(kept) {
				t.Errorf("redaction broke the JSON:\n%s", kept)
			}
		})
	}
}
