package credentials

import (
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

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

// TestAccepted: validation accepts jobs of format "credentials" (the
// agent delivers them), the examples' shapes included, with either
// delivery.
func TestAccepted(t *testing.T) {
	for _, doc := range []string{
		`{"version": 1, "domain": "d", "format": "credentials"}`,
		`{"version": 1, "domain": "d", "format": "credentials", "hostname": "web1", "credentials_delivery": "fwcfg"}`,
		`{"version": 1, "domain": "d", "format": "credentials", "hostname": "web1", "credentials_delivery": "smbios"}`,
	} {
		if _, r := job.ParseWith([]byte(doc), job.Defaults{}); !r.OK() {
			t.Errorf("%s: %v", doc, r.Err())
		}
	}
}
