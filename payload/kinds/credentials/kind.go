package credentials

import (
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

func init() { kinds.Register(kind{}) }

type kind struct{ kinds.Base }

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

// Valued: the payload is credentials, named values.
func (kind) Valued() bool { return true }

// Defaults sets the credentials delivery a job leaves out: "fwcfg" when
// it carries a secret, else "smbios". A job with a delivery gets no
// media default (there is no medium).
func (kind) Defaults(j *job.Job) { j.CredentialsDelivery = defaultDelivery(j) }
