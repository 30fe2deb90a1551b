// Package ignition is the payload kind of format "ignition": an Ignition
// config (the user's own, a Butane config translated, and the job's
// fields) for Fedora CoreOS, RHCOS and Flatcar, delivered as a plain file
// (fw_cfg or a raw virtio disk) or inside a cloud-init image.
package ignition

import (
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
	"github.com/vmpayload/vmpayload/payload/kinds/cloudinit"
)

func init() { kinds.Register(kind{}) }

type kind struct{ kinds.Base }

func (kind) Format() job.Format { return job.FormatIgnition }

// Labels is empty: an Ignition config inside an image carries the label
// of the cloud-init kind of its delivery, and inspect names that kind.
func (kind) Labels() []string { return nil }

// Label is the label of the image of ignition_delivery "configdrive" or
// "nocloud"; "" for the plain file of "fwcfg" and "blockdev".
func (kind) Label(j *job.Job) string {
	switch j.IgnitionDelivery {
	case job.DeliveryConfigDrive:
		return cloudinit.LabelConfigDrive
	case job.DeliveryNoCloud:
		return cloudinit.LabelNoCloud
	}
	return ""
}

func (k kind) Delivery(j *job.Job) string {
	switch {
	case k.Label(j) != "":
		return kinds.DeliveryDrive
	case j.IgnitionDelivery == job.DeliveryBlockdev:
		return kinds.DeliveryBlockdev
	}
	return kinds.DeliveryFwCfg
}
