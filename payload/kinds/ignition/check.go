package ignition

import (
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

func init() { kinds.RegisterCheck(kinds.Ignition, kind{}) }

// Check checks a job of format "ignition": its delivery and media, the
// fields Ignition cannot carry (the field table), then its users, files
// and own config (job.CheckIgnitionFields). Of any other job it refuses
// the fields only Ignition takes.
func (kind) Check(j *job.Job, r *job.Report) {
	if j.Format != job.FormatIgnition {
		kinds.Refuse(j, kinds.Ignition, false, r)
		return
	}
	switch j.IgnitionDelivery {
	case "", job.DeliveryFwCfg, job.DeliveryConfigDrive, job.DeliveryNoCloud, job.DeliveryBlockdev:
	default:
		r.Add("ignition_delivery", job.CodeInvalid, "%s is not an Ignition delivery; use \"fwcfg\", \"blockdev\", \"configdrive\" or \"nocloud\"", job.Quote(string(j.IgnitionDelivery)))
	}
	if (j.IgnitionDelivery == "" || j.IgnitionDelivery == job.DeliveryFwCfg || j.IgnitionDelivery == job.DeliveryBlockdev) && j.Media == job.MediaVFAT {
		d := j.IgnitionDelivery
		if d == "" {
			d = job.DeliveryFwCfg
		}
		r.Add("media", job.CodeConflict, "ignition_delivery %s passes the config file itself, not an image; media only applies to \"configdrive\" and \"nocloud\"", job.Quote(string(d)))
	}
	kinds.Refuse(j, kinds.Ignition, true, r)
	job.CheckIgnitionFields(j, r)
}

// Defaults gives a job that names no delivery fw_cfg (the agent's engine
// picks the one the domain's architecture reads).
func (kind) Defaults(j *job.Job) {
	if j.IgnitionDelivery == "" {
		j.IgnitionDelivery = job.DeliveryFwCfg
	}
}

// Chooses: the domain's architecture decides the delivery.
func (kind) Chooses() kinds.Choice { return kinds.ChooseDelivery }
