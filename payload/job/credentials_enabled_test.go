package job_test

import (
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds/credentials"
)

// The kind of format "credentials" is linked in and enabled for this
// package's tests (credentials_test.go validates its jobs); the agent
// refuses the format until credentials.Enabled is true for good.
func init() { credentials.Enabled = true }

// TestCredentialsNotDelivered: while the kind is not enabled, a job of
// format "credentials" is refused on field "format", and an unknown
// format's message does not offer "credentials".
func TestCredentialsNotDelivered(t *testing.T) {
	credentials.Enabled = false
	defer func() { credentials.Enabled = true }()
	_, r := job.ParseWith([]byte(`{"version": 1, "domain": "creds-vm", "format": "credentials", "hostname": "a"}`), job.Defaults{})
	if len(r.Errors) != 1 || r.Errors[0].Field != "format" || r.Errors[0].Message != credentials.NotDelivered {
		t.Errorf("errors %v, want one on format: %s", r.Errors, credentials.NotDelivered)
	}
	_, r = job.ParseWith([]byte(`{"version": 1, "domain": "creds-vm", "format": "bogus"}`), job.Defaults{})
	want := `"bogus" is not a format; use "nocloud", "configdrive", "ignition" or "sysprep"`
	if len(r.Errors) != 1 || r.Errors[0].Message != want {
		t.Errorf("errors %v, want %s", r.Errors, want)
	}
	credentials.Enabled = true
	_, r = job.ParseWith([]byte(`{"version": 1, "domain": "creds-vm", "format": "bogus"}`), job.Defaults{})
	want = `"bogus" is not a format; use "nocloud", "configdrive", "ignition", "sysprep" or "credentials"`
	if len(r.Errors) != 1 || r.Errors[0].Message != want {
		t.Errorf("enabled: errors %v, want %s", r.Errors, want)
	}
}
