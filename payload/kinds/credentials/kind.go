package credentials

import (
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

// Enabled lets validation accept jobs of format "credentials". It stays
// false until the agent delivers them (an "smbios" delivery, N fw_cfg
// files, the recipe, the hook and the commands: docs/credentials.md,
// "What remains"); until then every such job is refused on field "format"
// (NotDelivered), so this package can be merged before the agent can run
// its jobs. Tests of the kind set it.
var Enabled = false

// NotDelivered is the refusal of a job of format "credentials" while
// Enabled is false.
const NotDelivered = `format "credentials" is not delivered by this release yet (issue 42)`

func init() { kinds.Register(kind{}) }

type kind struct{}

func (kind) Format() job.Format { return job.FormatCredentials }

// Labels is empty: credentials travel in the domain definition, on no
// medium.
func (kind) Labels() []string { return nil }

// Label is "": there is no image.
func (kind) Label(*job.Job) string { return "" }

// Delivery is "fwcfg" for credentials_delivery "fwcfg" (one file per
// credential behind fw_cfg), else "smbios" (OEM strings in the domain's
// SMBIOS table; the default of a job without secrets).
func (kind) Delivery(j *job.Job) string {
	if j.CredentialsDelivery == job.CredentialsFwCfg {
		return kinds.DeliveryFwCfg
	}
	return kinds.DeliverySMBIOS
}

// Pending refuses the format while Enabled is false (kinds.Pending).
func (kind) Pending() string {
	if Enabled {
		return ""
	}
	return NotDelivered
}

// Valued: the payload is credentials, named values (kinds.Valued).
func (kind) Valued() bool { return true }
