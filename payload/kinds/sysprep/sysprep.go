// Package sysprep is the payload kind of format "sysprep": a Windows
// answer file (Unattend.xml or Autounattend.xml) on a floppy or a CD-ROM.
package sysprep

import (
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

// Label labels a sysprep floppy or CD-ROM. Windows looks for the answer
// file by name on every removable medium, not by label; the label tells
// vmpayload's own readers (Describe, inspect) what the image is.
const Label = "SYSPREP"

func init() { kinds.Register(kind{}) }

type kind struct{ kinds.Base }

func (kind) Format() job.Format    { return job.FormatSysprep }
func (kind) Labels() []string      { return []string{Label} }
func (kind) Label(*job.Job) string { return Label }

// Delivery is a floppy drive for sysprep_medium "floppy" (media vfat),
// else a CD-ROM drive.
func (kind) Delivery(j *job.Job) string {
	if j.Media == job.MediaVFAT {
		return kinds.DeliveryFloppy
	}
	return kinds.DeliveryDrive
}
