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

// TestKindAnswers: what package job, the engine and the commands ask of a
// job's kind instead of comparing its format or guest OS.
func TestKindAnswers(t *testing.T) {
	for _, c := range []struct {
		j      job.Job
		traits job.Traits
		choice kinds.Choice
	}{
		{job.Job{}, job.Traits{Known: true, Cloudbase: true}, kinds.ChooseNothing},
		{job.Job{Format: job.FormatNoCloud}, job.Traits{Known: true, NoCloud: true, Cloudbase: true}, kinds.ChooseNothing},
		{job.Job{Format: job.FormatConfigDrive, GuestOS: job.GuestWindows}, job.Traits{Known: true, OpenStack: true, Cloudbase: true, Windows: true}, kinds.ChooseNothing},
		{job.Job{Format: job.FormatIgnition}, job.Traits{Known: true}, kinds.ChooseDelivery},
		{job.Job{Format: job.FormatSysprep}, job.Traits{Known: true, AnswerFile: true}, kinds.ChooseMedium},
		{job.Job{Format: "bogus", GuestOS: job.GuestLinux}, job.Traits{}, kinds.ChooseNothing},
	} {
		if got := job.KindTraits(&c.j); got != c.traits {
			t.Errorf("format %q guest_os %q: traits %+v, want %+v", c.j.Format, c.j.GuestOS, got, c.traits)
		}
		if got := kinds.Chooses(c.j.Format); got != c.choice {
			t.Errorf("format %q: chooses %v, want %v", c.j.Format, got, c.choice)
		}
	}
}

// TestKindDefaults: the defaults withDefaults left to the kinds.
func TestKindDefaults(t *testing.T) {
	for _, c := range []struct{ in, want job.Job }{
		{job.Job{}, job.Job{Format: job.FormatNoCloud, Media: job.MediaISO}},
		{job.Job{Format: job.FormatIgnition}, job.Job{Format: job.FormatIgnition, Media: job.MediaISO, IgnitionDelivery: job.DeliveryFwCfg}},
		{job.Job{Format: job.FormatSysprep}, job.Job{Format: job.FormatSysprep, Media: job.MediaVFAT, SysprepMedium: job.MediumFloppy, SysprepFileName: job.UnattendXML}},
		{job.Job{Format: job.FormatSysprep, Media: job.MediaISO}, job.Job{Format: job.FormatSysprep, Media: job.MediaISO, SysprepMedium: job.MediumCDROM, SysprepFileName: job.UnattendXML}},
	} {
		got := c.in.Apply(job.Defaults{})
		if got.Format != c.want.Format || got.Media != c.want.Media || got.IgnitionDelivery != c.want.IgnitionDelivery ||
			got.SysprepMedium != c.want.SysprepMedium || got.SysprepFileName != c.want.SysprepFileName {
			t.Errorf("%+v: defaults %q %q %q %q %q, want %q %q %q %q %q", c.in, got.Format, got.Media, got.IgnitionDelivery, got.SysprepMedium, got.SysprepFileName,
				c.want.Format, c.want.Media, c.want.IgnitionDelivery, c.want.SysprepMedium, c.want.SysprepFileName)
		}
	}
}
