// Package cloudinit is the payload kinds cloud-init (and, for a Windows
// guest, cloudbase-init) reads: a NoCloud seed (format "nocloud", label
// cidata) and an OpenStack config drive (format "configdrive", label
// config-2).
package cloudinit

import (
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

// The labels cloud-init looks for.
const (
	LabelNoCloud     = "cidata"
	LabelConfigDrive = "config-2"
)

func init() {
	kinds.Register(kind{format: job.FormatNoCloud, label: LabelNoCloud})
	kinds.Register(kind{format: job.FormatConfigDrive, label: LabelConfigDrive})
}

type kind struct {
	kinds.Base
	format job.Format
	label  string
}

func (k kind) Format() job.Format     { return k.format }
func (k kind) Labels() []string       { return []string{k.label} }
func (k kind) Label(*job.Job) string  { return k.label }
func (kind) Delivery(*job.Job) string { return kinds.DeliveryDrive }
