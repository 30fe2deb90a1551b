// Package kinds holds what each payload kind is: one Kind per job format
// (cloud-init's NoCloud and config drive, Ignition, sysprep), each in its
// own package, behind one registry. Outside the kind packages and this
// one, nothing compares a format name or a guest OS: the payload, the
// recipe, the engine and the commands ask the job's kind. A new kind is
// one package that calls Register in its init, plus one line in package
// register.
package kinds

import (
	"slices"
	"strings"

	"github.com/vmpayload/vmpayload/payload/job"
)

// The deliveries: how a payload reaches the guest. The engine picks its
// way of attaching, detaching and collecting a payload by this name.
const (
	// DeliveryDrive is an image in a CD-ROM drive (ISO) or on a read-only
	// disk (vfat).
	DeliveryDrive = "drive"
	// DeliveryFloppy is a floppy image in a floppy drive.
	DeliveryFloppy = "floppy"
	// DeliveryFwCfg is a plain file behind QEMU's fw_cfg.
	DeliveryFwCfg = "fwcfg"
	// DeliveryBlockdev is a plain file as a read-only raw virtio disk.
	DeliveryBlockdev = "blockdev"
	// DeliverySMBIOS is strings in the domain's SMBIOS table (type 11 OEM
	// strings): a payload without files (format "credentials").
	DeliverySMBIOS = "smbios"
)

// Kind is one kind of payload.
type Kind interface {
	// Format is the job format the kind serves.
	Format() job.Format
	// Labels are the filesystem labels of the kind's images, the first
	// the one Label gives a job that names no other; inspect knows an
	// image of this kind by one of them (in any case).
	Labels() []string
	// Label is the filesystem label of the image of j (defaults
	// applied); "" for a payload that is a plain file.
	Label(j *job.Job) string
	// Delivery names the delivery of j's payload (defaults applied).
	Delivery(j *job.Job) string
}

var registry []Kind

// Register adds k to the registry; each kind's package calls it from its
// init.
func Register(k Kind) {
	registry = append(registry, k)
}

// Of returns the kind of format f ("" is nocloud); nil for a format no
// kind serves.
func Of(f job.Format) Kind {
	if f == "" {
		f = job.FormatNoCloud
	}
	i := slices.IndexFunc(registry, func(k Kind) bool { return k.Format() == f })
	if i < 0 {
		return nil
	}
	return registry[i]
}

// ByLabel returns the kind whose image carries filesystem label label (in
// any case, as cloud-init matches it); false for a label no kind gives.
func ByLabel(label string) (Kind, bool) {
	for _, k := range registry {
		for _, l := range k.Labels() {
			if strings.ToLower(l) == strings.ToLower(label) {
				return k, true
			}
		}
	}
	return nil, false
}

// Valued is implemented by a kind whose payload is not documents on an
// image but a set of named values (systemd credentials): the payload
// package asks it, never the format's name, whether a job renders values.
type Valued interface {
	// Valued reports that the kind's payload is named values.
	Valued() bool
}

// IsValued reports whether jobs of format f render named values
// (Valued) rather than documents.
func IsValued(f job.Format) bool {
	v, ok := Of(f).(Valued)
	return ok && v.Valued()
}
