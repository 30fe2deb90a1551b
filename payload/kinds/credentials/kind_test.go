package credentials

import (
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

// This package's tests validate jobs of format "credentials": the kind is
// enabled for them (the agent's build keeps Enabled false).
func init() { Enabled = true }

// TestKind: the registry serves format "credentials" with this kind; it
// has no labels and no image, and its delivery follows
// credentials_delivery.
func TestKind(t *testing.T) {
	k := kinds.Of(job.FormatCredentials)
	if k == nil {
		t.Fatal("no kind for format \"credentials\"")
	}
	if k.Format() != job.FormatCredentials || len(k.Labels()) != 0 {
		t.Errorf("format %q labels %v", k.Format(), k.Labels())
	}
	for _, c := range []struct {
		d    job.CredentialsDelivery
		want string
	}{{job.CredentialsSMBIOS, kinds.DeliverySMBIOS}, {job.CredentialsFwCfg, kinds.DeliveryFwCfg}, {"", kinds.DeliverySMBIOS}} {
		j := &job.Job{Format: job.FormatCredentials, CredentialsDelivery: c.d}
		if l, d := k.Label(j), k.Delivery(j); l != "" || d != c.want {
			t.Errorf("credentials_delivery %q: label %q delivery %q, want \"\" %q", c.d, l, d, c.want)
		}
	}
	// a defaulted job with a secret goes by fw_cfg
	j, r := job.ParseWith([]byte(`{"version": 1, "domain": "d", "format": "credentials", "credential_secrets": {"x.y": "s"}}`), job.Defaults{})
	if !r.OK() {
		t.Fatal(r.Err())
	}
	if a := j.Apply(job.Defaults{}); k.Delivery(&a) != kinds.DeliveryFwCfg {
		t.Errorf("defaulted job with a secret: delivery %q", k.Delivery(&a))
	}
}

// TestNotDelivered: with Enabled false, validation refuses every job of
// format "credentials" on field "format" (and only there), whatever else
// it carries; the examples included.
func TestNotDelivered(t *testing.T) {
	Enabled = false
	defer func() { Enabled = true }()
	for _, doc := range []string{
		`{"version": 1, "domain": "d", "format": "credentials"}`,
		`{"version": 1, "domain": "d", "format": "credentials", "hostname": "web1", "credentials_delivery": "fwcfg"}`,
	} {
		_, r := job.ParseWith([]byte(doc), job.Defaults{})
		if len(r.Errors) != 1 || r.Errors[0].Field != "format" || r.Errors[0].Message != NotDelivered {
			t.Errorf("%s: errors %v, want one on format: %s", doc, r.Errors, NotDelivered)
		}
	}
	// other formats are untouched
	if _, r := job.ParseWith([]byte(`{"version": 1, "domain": "d", "hostname": "web1"}`), job.Defaults{}); !r.OK() {
		t.Errorf("nocloud job: %v", r.Err())
	}
}
