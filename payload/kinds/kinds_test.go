package kinds_test

import (
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
	_ "github.com/vmpayload/vmpayload/payload/kinds/register"
)

// TestRegistry checks that every format has its kind, and what the kinds
// answer for each delivery and medium.
func TestRegistry(t *testing.T) {
	for _, c := range []struct {
		j               job.Job
		label, delivery string
	}{
		{job.Job{Format: job.FormatNoCloud, Media: job.MediaISO}, "cidata", kinds.DeliveryDrive},
		{job.Job{Format: job.FormatConfigDrive, Media: job.MediaVFAT}, "config-2", kinds.DeliveryDrive},
		{job.Job{Format: job.FormatSysprep, Media: job.MediaVFAT}, "SYSPREP", kinds.DeliveryFloppy},
		{job.Job{Format: job.FormatSysprep, Media: job.MediaISO}, "SYSPREP", kinds.DeliveryDrive},
		{job.Job{Format: job.FormatIgnition, IgnitionDelivery: job.DeliveryFwCfg}, "", kinds.DeliveryFwCfg},
		{job.Job{Format: job.FormatIgnition, IgnitionDelivery: job.DeliveryBlockdev}, "", kinds.DeliveryBlockdev},
		{job.Job{Format: job.FormatIgnition, IgnitionDelivery: job.DeliveryNoCloud}, "cidata", kinds.DeliveryDrive},
		{job.Job{Format: job.FormatIgnition, IgnitionDelivery: job.DeliveryConfigDrive}, "config-2", kinds.DeliveryDrive},
		{job.Job{Format: job.FormatCredentials, CredentialsDelivery: job.CredentialsSMBIOS}, "", kinds.DeliverySMBIOS},
		{job.Job{Format: job.FormatCredentials, CredentialsDelivery: job.CredentialsFwCfg}, "", kinds.DeliveryFwCfg},
	} {
		k := kinds.Of(c.j.Format)
		if k == nil {
			t.Fatalf("no kind for format %q", c.j.Format)
		}
		if l, d := k.Label(&c.j), k.Delivery(&c.j); l != c.label || d != c.delivery {
			t.Errorf("%s/%s/%s: label %q delivery %q, want %q %q", c.j.Format, c.j.Media, c.j.IgnitionDelivery, l, d, c.label, c.delivery)
		}
	}
	if kinds.Of("bogus") != nil {
		t.Error("a kind for format \"bogus\"")
	}
	for label, f := range map[string]job.Format{"CIDATA": job.FormatNoCloud, "config-2": job.FormatConfigDrive, "sysprep": job.FormatSysprep} {
		if k, ok := kinds.ByLabel(label); !ok || k.Format() != f {
			t.Errorf("ByLabel(%q) = %v, %v; want format %s", label, k, ok, f)
		}
	}
	if _, ok := kinds.ByLabel("ignition"); ok {
		t.Error("a kind for label \"ignition\"")
	}
}
