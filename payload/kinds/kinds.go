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

// Kind is one kind of payload: what a package of payload/kinds
// implements and registers. Embed Base for the answers of a kind that
// has no checks, defaults or choices of its own.
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
	// Check is the kind's own checks of a job of its kind (job.Validate, in
	// the field table's order: ignition, windows, sysprep, credentials); of
	// any other job the fields only it takes are refused (Refuse) instead.
	Check(j *job.Job, r *job.Report)
	// Defaults fills in the kind's own defaults, before the job's shared
	// ones (media "iso", user_data_mode "merge").
	Defaults(j *job.Job)
	// Chooses is what the kind leaves to the domain its job is for.
	Chooses() Choice
	// Valued reports that the kind's payload is not documents on an
	// image but named values (systemd credentials).
	Valued() bool
	// Document is the document of j the payload carries whole (an answer
	// file) when the job gives it inline; "" when it gives none or names
	// a secret.
	Document(j *job.Job) string
	// CheckDocument checks text, such a document read from the secret
	// named in field; its messages quote nothing of text.
	CheckDocument(j *job.Job, field, text string) []job.FieldError
}

// Base gives a kind the answers of one that has nothing of its own: no
// checks, no defaults, no choice, documents rather than values, no
// whole document. A kind embeds it and implements what it has.
type Base struct{}

func (Base) Check(*job.Job, *job.Report)                             {}
func (Base) Defaults(*job.Job)                                       {}
func (Base) Chooses() Choice                                         { return ChooseNothing }
func (Base) Valued() bool                                            { return false }
func (Base) Document(*job.Job) string                                { return "" }
func (Base) CheckDocument(*job.Job, string, string) []job.FieldError { return nil }

var registry []Kind

// Register adds k to the registry; each kind's package calls it from its
// init.
func Register(k Kind) { registry = append(registry, k) }

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

// IsValued reports whether jobs of format f render named values
// (Kind.Valued) rather than documents.
func IsValued(f job.Format) bool {
	k := Of(f)
	return k != nil && k.Valued()
}
