// Package payload turns a job into a cloud-init payload image: it resolves
// the job's secrets, renders the documents (package cloudinit) and writes
// the image (package image). The agent and the offline CLI both use it.
package payload

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
	cloudinitkind "github.com/vmpayload/vmpayload/payload/kinds/cloudinit"
	"github.com/vmpayload/vmpayload/payload/kinds/credentials"
	_ "github.com/vmpayload/vmpayload/payload/kinds/register"
	sysprepkind "github.com/vmpayload/vmpayload/payload/kinds/sysprep"
)

// Labels of the payload formats.
const (
	LabelNoCloud     = cloudinitkind.LabelNoCloud
	LabelConfigDrive = cloudinitkind.LabelConfigDrive
	LabelSysprep     = sysprepkind.Label
)

// Label returns the filesystem label of the images of format f: its
// kind's, or LabelNoCloud for a kind whose label is its job's delivery's.
func Label(f job.Format) string {
	if k := kinds.Of(f); k != nil && k.Labels() != nil {
		return k.Labels()[0]
	}
	return LabelNoCloud
}

// Extension returns the image file extension for media m.
func Extension(m job.Media) string {
	if m == job.MediaVFAT {
		return ".img"
	}
	return ".iso"
}

// Options tune Render and Build. Secrets are resolved by Check
// (CheckOptions.SecretsDir), not here.
type Options struct {
	// Salt is passed to cloudinit.Options (tests only).
	Salt func() (string, error)
	// Rand is passed to cloudinit.Options: the source of generated random
	// seeds (nil: crypto/rand; tests only).
	Rand io.Reader
	// Mode and GID of the image file (see image.Options). GID -1 keeps it.
	Mode os.FileMode
	GID  int
	// NoSync skips the image's fsyncs (see image.Options.NoSync); the agent
	// never sets it.
	NoSync bool
	// Identity pins the content hash and instance-id (see Identity);
	// package recipe sets it for rebuilds.
	Identity *Identity
	// ExpectSHA256 makes Write refuse an image with other bytes (see
	// image.Options.ExpectSHA256).
	ExpectSHA256 string
	// ISOLayout is the layout of an ISO image (image.Options.ISOLayout):
	// zero, the newest, for new images; package recipe sets the one a
	// recipe records.
	ISOLayout image.ISOLayout
}

// Identity is the pair of identities a render derives from a job: the
// content hash (64 hex digits) and the instance-id.
type Identity = cloudinit.Identity

// Rendered is a job's documents plus what is needed to write its image.
type Rendered struct {
	Job job.Job // with defaults applied
	// Docs are the documents of a kind that renders documents; nil for
	// one of named values (Shape ShapeParts or ShapeInline).
	Docs *cloudinit.Documents
	// creds are the values of a valued kind (Kind.Valued).
	creds []credentials.Credential
}

// Render renders the documents of a job Check passed. It does not
// validate the job again; its only refusal of content is documents over
// the image limit, as a *job.ValidationError.
func Render(c *Checked, opt Options) (*Rendered, error) {
	in := c.in
	if c.creds != nil {
		return &Rendered{Job: in.Job, creds: c.creds}, nil
	}
	in.Identity = opt.Identity
	if c.docs != nil && opt.Identity == nil && opt.Salt == nil && opt.Rand == nil {
		return &Rendered{Job: in.Job, Docs: c.docs}, nil // the check's render
	}
	docs, err := cloudinit.Render(in, cloudinit.Options{Salt: opt.Salt, Rand: opt.Rand})
	if err != nil {
		return nil, err
	}
	return &Rendered{Job: in.Job, Docs: docs}, nil
}

// Spec returns the image spec for the rendered documents.
func (r *Rendered) Spec() image.Spec {
	s := image.Spec{Media: r.Job.Media, Label: LabelOf(r.Job)}
	if r.Delivery() == kinds.DeliveryFloppy {
		s.Media = image.MediaFloppy
	}
	for _, f := range r.Docs.Files {
		s.Entries = append(s.Entries, image.Entry{Path: f.Path, Data: f.Data})
	}
	return s
}

// Delivery names how the payload reaches the guest (kinds.Delivery*):
// the engine attaches, detaches and collects it by that name.
func (r *Rendered) Delivery() string { return kinds.Of(r.Job.Format).Delivery(&r.Job) }

// IsFile reports whether the payload is a plain file (an Ignition config
// behind fw_cfg or on a raw disk) rather than an image.
func (r *Rendered) IsFile() bool { return LabelOf(r.Job) == "" }

// IsFile reports whether img describes a plain file (of a kind whose
// label is its delivery's, without one) rather than an image.
func (img Image) IsFile() bool {
	k := kinds.Of(job.Format(img.Format))
	return img.Label == "" && k != nil && k.Labels() == nil
}

// Delivery names how an image described as img reaches the guest: the
// delivery of its format's kind for its media.
func (img Image) Delivery() string {
	j := job.Job{Format: job.Format(img.Format), Media: job.Media(img.Media)}
	return kinds.Of(j.Format).Delivery(&j)
}

// ImageName is the file name for the image of this content for a domain:
// a new content gives a new name, so an image a domain may be reading is
// never modified in place.
func (r *Rendered) ImageName(prefix string) string {
	if r.IsFile() {
		return prefix + "-" + r.Docs.ContentHash[:16] + ".ign"
	}
	return prefix + "-" + r.Docs.ContentHash[:16] + Extension(r.Job.Media)
}

// Image describes a payload image the way results report it: where it
// is and what it holds. payload.Result (vmpayload build) and the agent's
// result.Payload both carry it; Describe is the one place it is made from
// what the image file holds (image.Info).
type Image struct {
	Path       string `json:"path"`
	Format     string `json:"format"`
	Media      string `json:"media"`
	Label      string `json:"label"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	InstanceID string `json:"instance_id"`
}

// Result describes a built image.
type Result struct {
	Image
	ContentHash string   `json:"content_hash"`
	Files       []string `json:"files,omitempty"`
	// IgnitionSpec is the spec of the Ignition config of a job of format
	// "ignition".
	IgnitionSpec string `json:"ignition_spec,omitempty"`
	// ISOLayout is the layout of an ISO image (image.Info.ISOLayout): the
	// one Write built, or the one a reused image declares. Recipes record
	// it; results do not show it.
	ISOLayout image.ISOLayout `json:"-"`
}

// Write writes the rendered image to out atomically (see image.Write);
// for an Ignition config delivered by fw_cfg, the config file itself.
func (r *Rendered) Write(ctx context.Context, out string, opt Options) (Result, error) {
	if r.Docs == nil {
		return Result{}, fmt.Errorf("writing %s: a payload of named values is no one file (see Shape, Parts, WritePart)", out)
	}
	if r.IsFile() {
		return r.writeIgnitionFile(ctx, out, opt)
	}
	gid := opt.GID
	info, err := image.Write(ctx, r.Spec(), out, image.Options{Mode: opt.Mode, GID: gid, NoSync: opt.NoSync, ExpectSHA256: opt.ExpectSHA256, ISOLayout: opt.ISOLayout})
	if err != nil {
		return Result{}, fmt.Errorf("writing the %s image %s: %w", r.Job.Media, out, err)
	}
	return r.result(info), nil
}

// Describe describes the payload image image.Write or image.Inspect found
// in a file; its format and media follow from the label and the
// filesystem (Format is "" for a label cloud-init does not look for).
// instanceID is the instance-id its documents carry, when known.
func Describe(info image.Info, instanceID string) Image {
	img := Image{Path: info.Path, Media: string(job.MediaISO), Label: info.Label, Size: info.Size, SHA256: info.SHA256, InstanceID: instanceID}
	if k, ok := kinds.ByLabel(info.Label); ok {
		img.Format = string(k.Format())
	}
	if info.FSType == image.FSTypeVFAT {
		img.Media = string(job.MediaVFAT)
	}
	return img
}

func (r *Rendered) result(info image.Info) Result {
	res := Result{Image: Describe(info, r.Docs.InstanceID), ContentHash: r.Docs.ContentHash, ISOLayout: info.ISOLayout}
	if r.Docs.IgnitionSpec != "" {
		res.Format, res.IgnitionSpec = string(r.Job.Format), r.Docs.IgnitionSpec
	}
	for _, f := range info.Files {
		res.Files = append(res.Files, f.Path)
	}
	return res
}

// Reuse checks that an existing image at path carries this content's label
// and files (for an Ignition config delivered by fw_cfg: that the file
// holds exactly the rendered config) and returns its description; the
// agent uses it to keep the image of an unchanged re-submitted job instead
// of building a new one.
func (r *Rendered) Reuse(path string) (Result, error) {
	if r.Docs == nil {
		return Result{}, fmt.Errorf("reusing %s: a payload of named values is no one file", path)
	}
	if r.IsFile() {
		return r.reuseIgnitionFile(path)
	}
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		// never inspect (nor reuse) through a symlink in the payload directory
		return Result{}, fmt.Errorf("existing image %s is a %s, not a regular file", path, image.FileKind(fi.Mode()))
	}
	info, err := image.Inspect(path)
	if err != nil {
		return Result{}, fmt.Errorf("inspecting existing image %s: %w", path, err)
	}
	if info.Label != LabelOf(r.Job) {
		return Result{}, fmt.Errorf("existing image %s has label %q, want %q", path, info.Label, LabelOf(r.Job))
	}
	want := map[string]bool{}
	for _, f := range r.Docs.Files {
		want[f.Path] = true
	}
	for _, f := range info.Files {
		delete(want, f.Path)
	}
	if len(want) > 0 {
		return Result{}, fmt.Errorf("existing image %s lacks %d of the expected files", path, len(want))
	}
	return r.result(info), nil
}

// Build renders the checked job c and writes its image to out.
func Build(ctx context.Context, c *Checked, out string, opt Options) (Result, error) {
	r, err := Render(c, opt)
	if err != nil {
		return Result{}, err
	}
	return r.Write(ctx, out, opt)
}
