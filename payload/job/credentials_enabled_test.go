package job_test

import (
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
	_ "github.com/vmpayload/vmpayload/payload/kinds/credentials"
)

// TestCredentialsAccepted: a job of format "credentials" passes
// validation (the agent delivers it, issue 42), and an unknown format's
// message offers "credentials".
func TestCredentialsAccepted(t *testing.T) {
	_, r := job.ParseWith([]byte(`{"version": 1, "domain": "creds-vm", "format": "credentials", "hostname": "a"}`), job.Defaults{})
	if !r.OK() {
		t.Errorf("credentials job refused: %v", r.Err())
	}
	_, r = job.ParseWith([]byte(`{"version": 1, "domain": "creds-vm", "format": "bogus"}`), job.Defaults{})
	want := `"bogus" is not a format; use "nocloud", "configdrive", "ignition", "sysprep" or "credentials"`
	if len(r.Errors) != 1 || r.Errors[0].Message != want {
		t.Errorf("errors %v, want %s", r.Errors, want)
	}
}
