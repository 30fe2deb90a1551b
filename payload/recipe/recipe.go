// Package recipe is the durable description of a built payload image: the
// normalised job that produced it, the image's path, size and sha256 and the
// instance-id the guest saw. The agent writes it into the domain's
// persistent XML (a <metadata> child in the Namespace below); a libvirt hook
// reads it back before QEMU starts and, when the image is gone (a host
// reboot empties the tmpfs payload directory), rebuilds it byte-identical
// with Rebuild. docs/durability.md describes the format.
//
// A recipe never holds a plaintext secret: a plaintext users[].password is
// replaced by the SHA-512 crypt hash that went into the image, and
// *_secret fields stay references into the secrets directory (user-data,
// passwords, SSH host private keys, a sysprep answer file and the Windows
// administrator password). A random_seed generated at build time
// is recorded as the base64 data that went into the image, so a rebuild
// gives the same bytes; the guest has consumed it by then. Domain
// metadata is readable by read-only libvirt clients, so the job (password
// hashes, inline file contents and user-data, the seed) is written sealed
// (package internal/seal) with the key file KeyFile(secrets_dir); only the
// image's attributes stay in clear. Recipes written before sealing (the job
// in clear) are still read and rebuilt.
package recipe

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

// Namespace is the XML namespace URI of the recipe element, and Prefix the
// prefix vmpayload writes it with (readers match the URI, never the prefix).
const (
	Namespace = "https://github.com/vmpayload/vmpayload/xmlns/recipe/1"
	Prefix    = "vmpayload"
)

// Version is the recipe format version (the element's version attribute).
const Version = 1

// Recipe describes one built payload image and how to build it again.
type Recipe struct {
	// Job is the normalised job: defaults applied; id, action and
	// domain_xml dropped (they do not reach the image; domain does, as the
	// config-2 name of a job without hostname); plaintext passwords
	// replaced by their hash; a generated random_seed replaced by the data
	// that went into the image. Secrets stay references.
	Job job.Job
	// Path is the absolute path of the image.
	Path string
	// SHA256 is the hex SHA-256 of the image file, Size its size in bytes.
	SHA256 string
	Size   int64
	// InstanceID is the instance-id the guest sees; ContentHash the
	// content identity the image was built with (it also names the image
	// file and the MIME boundary of merged user-data), recorded because a
	// job whose plaintext password became a hash cannot derive it again.
	InstanceID  string
	ContentHash string
	// Format, Media and Label of the image.
	Format job.Format
	Media  job.Media
	Label  string
	// ISOLayout is the layout of an ISO image (0 for vfat): a rebuild
	// must use the layout the image was built in. The element's iso-layout
	// attribute carries it; a recipe without one (every recipe written
	// before issue 35) is image.ISOLayoutGoDiskfs.
	ISOLayout image.ISOLayout
	// Values are the values of a valued payload (Kind.Valued: systemd
	// credentials), which has no image: Path, SHA256, Size, Label,
	// InstanceID and ISOLayout are then zero (values.go).
	Values []Value

	// sealedKey and sealedBlob are the sealed job of a recipe read from a
	// domain XML and not opened yet (Open): Job is then zero.
	sealedKey  string
	sealedBlob []byte
}

// KeyFileName is the name of the recipe key file in the secrets directory.
// It starts with a dot, so that no job can name it as a secret.
const KeyFileName = ".recipe.key"

// KeyFile returns the recipe key file of a secrets directory.
func KeyFile(secretsDir string) string { return filepath.Join(secretsDir, KeyFileName) }

// Sealed reports whether r's job is sealed and not opened yet.
func (r *Recipe) Sealed() bool { return r.sealedBlob != nil }

// Open decrypts a sealed recipe's job with keys and checks it as
// FromDomainXML checks a job in clear. A recipe that is not sealed is left
// as it is. A key keys does not hold is an error wrapping seal.ErrNoKey
// that names the key file.
func (r *Recipe) Open(keys *seal.Keyring) error {
	if !r.Sealed() {
		return nil
	}
	if keys == nil {
		return fmt.Errorf("opening the sealed recipe of %s: no key file", r.Path)
	}
	js, err := keys.Open(r.sealedKey, r.sealedBlob, r.associatedData())
	if err != nil {
		return fmt.Errorf("opening the sealed recipe of %s: %w", r.Path, err)
	}
	j, err := parseJob(js)
	if err != nil {
		return err
	}
	o := *r
	o.Job, o.sealedKey, o.sealedBlob = j, "", nil
	if err := o.Check(); err != nil {
		return err
	}
	*r = o
	return nil
}

// associatedData binds a sealed job to the image attributes it is stored
// with: a blob moved to another recipe (another image) does not open. The
// path is not bound: hosts that migrate to each other may hold the image
// under other payload directories' paths in tests and tools that rewrite it;
// which domain may name which image is Rebuild's DomainUUID check.
func (r *Recipe) associatedData() []byte {
	return []byte(strings.Join([]string{
		"vmpayload recipe " + strconv.Itoa(Version), r.SHA256, strconv.FormatInt(r.Size, 10),
		string(r.Format), string(r.Media), r.Label, r.InstanceID, r.ContentHash, strconv.Itoa(int(r.ISOLayout)),
	}, "\x00") + r.valuesAD())
}

// ErrPrebuilt is returned by New for a prebuilt_image job: vmpayload did not
// build that image and cannot build it again.
var ErrPrebuilt = errors.New("a prebuilt_image job has no recipe")

// New returns the recipe of the image res that was written from r.
func New(r *payload.Rendered, res payload.Result) (*Recipe, error) {
	if r == nil || r.Docs == nil {
		return nil, fmt.Errorf("making a recipe: no rendered job")
	}
	j := normalise(r.Job)
	if j.PrebuiltImage != "" {
		return nil, fmt.Errorf("making a recipe: %w", ErrPrebuilt)
	}
	j.Users = append([]job.User(nil), j.Users...)
	for i, u := range j.Users {
		if u.Password == "" {
			continue
		}
		if i >= len(r.Docs.PasswordHashes) || r.Docs.PasswordHashes[i] == "" {
			return nil, fmt.Errorf("making a recipe: the password hash of users[%d] is not known", i)
		}
		u.Password, u.PasswordHash = "", r.Docs.PasswordHashes[i]
		j.Users[i] = u
	}
	if rs := j.RandomSeed; rs != nil && rs.GenerateBytes != 0 {
		// a generated seed is recorded as the value that went into the
		// image, like a password as its hash
		if r.Docs.RandomSeed == "" {
			return nil, fmt.Errorf("making a recipe: the generated random seed is not known")
		}
		// a reused image holds the seed of the render that wrote it, not
		// this one's: recording this one would make every rebuild fail
		if err := checkSeedInImage(r, res.Path); err != nil {
			return nil, fmt.Errorf("making a recipe: %w", err)
		}
		j.RandomSeed = &job.RandomSeed{Data: r.Docs.RandomSeed}
	}
	rc := &Recipe{
		Job: j, Path: res.Path, SHA256: res.SHA256, Size: res.Size,
		InstanceID: r.Docs.InstanceID, ContentHash: r.Docs.ContentHash,
		Format: j.Format, Media: j.Media, Label: payload.LabelOf(j),
	}
	if rc.isISOImage() {
		// the layout the image has: Write's, or a reused image's own
		rc.ISOLayout = res.ISOLayout
	}
	if res.InstanceID != "" && res.InstanceID != rc.InstanceID {
		return nil, fmt.Errorf("making a recipe: the result's instance-id %q is not the rendered one %q", res.InstanceID, rc.InstanceID)
	}
	if res.Label != "" && res.Label != rc.Label {
		return nil, fmt.Errorf("making a recipe: the result's label %q is not %q", res.Label, rc.Label)
	}
	if err := rc.Check(); err != nil {
		return nil, fmt.Errorf("making a recipe: %w", err)
	}
	return rc, nil
}

// checkSeedInImage verifies that the documents of r that carry its
// generated random seed are in the image at path as rendered.
func checkSeedInImage(r *payload.Rendered, path string) error {
	for _, f := range r.Docs.Files {
		if !strings.Contains(string(f.Data), r.Docs.RandomSeed) {
			continue
		}
		got, err := image.ReadFile(path, f.Path)
		if err != nil {
			return fmt.Errorf("checking the generated random seed in %s: %w", path, err)
		}
		if string(got) != string(f.Data) {
			return fmt.Errorf("the image %s does not hold this render's generated random seed (%s differs; was an existing image reused?)", path, f.Path)
		}
	}
	return nil
}

// normalise applies the job's defaults and drops the fields that do not
// reach the image (id, action, domain_xml, guest_report false: off is the
// same content as absent).
func normalise(j job.Job) job.Job {
	j = j.Apply(job.Defaults{})
	j.ID, j.Action, j.DomainXML = "", "", ""
	if j.GuestReport != nil && !*j.GuestReport {
		j.GuestReport = nil
	}
	return j
}

// FieldError is a problem with one field of a recipe. Field names the
// element or attribute, e.g. "image@sha256" or "job.users[0].password".
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return "recipe " + e.Field + ": " + e.Message }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Check reports the first problem with r: a path that is not absolute and
// clean, a malformed sha256 or content hash, a size, format, media or label
// that does not fit, a job that is invalid, does not match the image, is a
// prebuilt_image job or carries a plaintext password.
func (r *Recipe) Check() error {
	if r.valued() {
		return r.checkValues()
	}
	switch {
	case r.Path == "" || !filepath.IsAbs(r.Path):
		return fieldErr("image@path", "%q is not an absolute path", r.Path)
	case hasDotDot(r.Path):
		return fieldErr("image@path", "%q contains \"..\"", r.Path)
	case filepath.Clean(r.Path) != r.Path:
		return fieldErr("image@path", "%q is not a clean path", r.Path)
	case !isHex64(r.SHA256):
		return fieldErr("image@sha256", "%q is not a lowercase hex SHA-256", r.SHA256)
	case r.Size <= 0:
		return fieldErr("image@size", "%d is not a positive size", r.Size)
	case r.Format == "" || kinds.Of(r.Format) == nil:
		return fieldErr("image@format", "%q is not nocloud, configdrive, ignition or sysprep", r.Format)
	case r.Media != job.MediaISO && r.Media != job.MediaVFAT:
		return fieldErr("image@media", "%q is not iso or vfat", r.Media)
	case r.Label != recipeLabel(r) && !(r.Sealed() && labelOfJob(r.Format)): // such a label is the job's delivery's, checked when opened
		return fieldErr("image@label", "%q is not the label of format %s (%q)", r.Label, r.Format, recipeLabel(r))
	case r.InstanceID == "" || hasControl(r.InstanceID):
		return fieldErr("image@instance-id", "%q is not an instance-id", r.InstanceID)
	case !isHex64(r.ContentHash):
		return fieldErr("image@content-hash", "%q is not a lowercase hex SHA-256", r.ContentHash)
	case r.isISOImage() && r.ISOLayout != image.ISOLayoutGoDiskfs && r.ISOLayout != image.ISOLayoutJolietTree:
		return fieldErr("image@iso-layout", "%d is not an ISO layout this vmpayload builds (%d, or %d when absent)", r.ISOLayout, image.ISOLayoutJolietTree, image.ISOLayoutGoDiskfs)
	case !r.isISOImage() && r.ISOLayout != 0:
		return fieldErr("image@iso-layout", "a %s image has no ISO layout", describeMedia(r))
	}
	if r.Sealed() {
		return nil // the job is checked when it is opened
	}
	j := r.Job
	switch {
	case j.PrebuiltImage != "":
		return fieldErr("job.prebuilt_image", "%v", ErrPrebuilt)
	case j.Format != r.Format:
		return fieldErr("job.format", "%q differs from the image's format %q", j.Format, r.Format)
	case j.Media != r.Media:
		return fieldErr("job.media", "%q differs from the image's media %q", j.Media, r.Media)
	case j.ID != "":
		return fieldErr("job.id", "a recipe's job carries no id")
	case j.Action != "":
		return fieldErr("job.action", "a recipe's job carries no action")
	case j.DomainXML != "":
		return fieldErr("job.domain_xml", "a recipe's job carries no domain_xml")
	}
	for i, u := range j.Users {
		if u.Password != "" {
			return fieldErr(fmt.Sprintf("job.users[%d].password", i), "a recipe must not carry a plaintext password")
		}
	}
	if j.RandomSeed != nil && j.RandomSeed.GenerateBytes != 0 {
		return fieldErr("job.random_seed.generate_bytes", "a recipe records the generated seed as data; a rebuild cannot generate the same bytes")
	}
	if rep := j.Validate(); !rep.OK() {
		e := rep.Errors[0]
		return fieldErr(strings.TrimSuffix("job."+e.Field, "."), "%s", e.Message)
	}
	return nil
}

// recipeLabel is the label r's image must have: its format's, or for a
// kind whose label is its job's delivery's (Ignition), its job's.
func recipeLabel(r *Recipe) string {
	if labelOfJob(r.Format) && r.Job.Format == r.Format {
		return payload.LabelOf(r.Job)
	}
	return payload.Label(r.Format)
}

// labelOfJob reports whether the label of format f's images depends on
// the job (an Ignition config's is its delivery's, none for a file).
func labelOfJob(f job.Format) bool {
	k := kinds.Of(f)
	return k != nil && k.Labels() == nil
}

// jobJSON is the recipe's job as JSON text.
func (r *Recipe) jobJSON() ([]byte, error) {
	b, err := json.Marshal(r.Job)
	if err != nil {
		return nil, fmt.Errorf("encoding the recipe's job: %w", err)
	}
	return b, nil
}

// secretRefs lists the secrets the recipe's job names, for error messages.
func (r *Recipe) secretRefs() []string {
	var s []string
	for i, u := range r.Job.Users {
		if u.PasswordSecret != "" {
			s = append(s, fmt.Sprintf("%q (users[%d].password_secret)", u.PasswordSecret, i))
		}
	}
	for i, k := range r.Job.SSHHostKeys {
		s = append(s, fmt.Sprintf("%q (ssh_host_keys[%d].private_key_secret)", k.PrivateKeySecret, i))
	}
	j := &r.Job
	for _, f := range [][2]string{{j.UserDataSecret, "user_data_secret"}, {j.SysprepSecret, "sysprep_secret"},
		{j.AdminPasswordSecret, "admin_password_secret"}, {j.DomainAdminPasswordSecret, "domain_admin_password_secret"}, {j.ProductKeySecret, "product_key_secret"}} {
		if f[0] != "" {
			s = append(s, fmt.Sprintf("%q (%s)", f[0], f[1]))
		}
	}
	return s
}

func isHex64(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s) == 64 && strings.ToLower(s) == s
}

func hasDotDot(p string) bool { return slices.Contains(strings.Split(p, "/"), "..") }

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 || c == 0x7f })
}

// isISOImage reports whether the recipe's payload is an ISO image, the
// only kind with an ISO layout. An Ignition config delivered by fw_cfg
// (format ignition, no label) is a plain file, whatever the job's media.
func (r *Recipe) isISOImage() bool {
	return r.Media == job.MediaISO && !r.isFile()
}

// isFile reports whether the recipe's payload is a plain file: no label,
// of a kind whose label is its delivery's.
func (r *Recipe) isFile() bool { return r.Label == "" && labelOfJob(r.Format) }

// describeMedia names the recipe's payload kind for messages.
func describeMedia(r *Recipe) string {
	if r.isFile() {
		return "fw_cfg"
	}
	return string(r.Media)
}
