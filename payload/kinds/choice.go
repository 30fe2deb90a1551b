package kinds

import "github.com/vmpayload/vmpayload/payload/job"

// Choice is what a kind leaves for the domain its job is for to decide,
// which the agent (or `vmpayload recipe --domain-xml`) decides once it
// has the domain's definition.
type Choice int

const (
	// ChooseNothing: the job alone decides.
	ChooseNothing Choice = iota
	// ChooseDelivery: the domain's architecture decides the delivery of
	// a job that names none (an Ignition config: fw_cfg, or a raw disk
	// where QEMU has no fw_cfg device), and whether the named one
	// reaches the guest; the guest reads the payload on its first boot
	// only.
	ChooseDelivery
	// ChooseMedium: the domain's machine decides the medium of a job
	// that names none (a sysprep answer file: a floppy, or a CD-ROM on a
	// machine with no floppy controller).
	ChooseMedium
)

// Chooses is what a job of format f leaves to its domain.
func Chooses(f job.Format) Choice {
	if k := Of(f); k != nil {
		return k.Chooses()
	}
	return ChooseNothing
}
