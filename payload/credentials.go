package payload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vmpayload/vmpayload/internal/atomicfile"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
	"github.com/vmpayload/vmpayload/payload/kinds/credentials"
	"github.com/vmpayload/vmpayload/payload/secrets"
)

// Shape is what a rendered payload is on the host: the engine, the recipe
// and the commands ask it (Rendered.Shape) how many files to write.
type Shape int

const (
	// ShapeImage is one file: an image, or a plain file (an Ignition
	// config).
	ShapeImage Shape = iota
	// ShapeParts is several files, one per name the guest reads (the
	// credentials of a fw_cfg delivery, each its own file).
	ShapeParts
	// ShapeInline is no file at all: values the delivery writes into the
	// domain definition (the credentials of an SMBIOS delivery).
	ShapeInline
)

// PartMode is the permission of a part file: a part may be a secret (a
// password hash, a credential from a secret), so only its owner reads it
// (libvirt gives it to QEMU's user when the domain starts).
const PartMode os.FileMode = 0o600

// Part is one file of a payload of several named files (ShapeParts).
type Part struct {
	// Name is the name the guest reads the file by (a fw_cfg name).
	Name string
	// Key is the part's own name (the credential's), which the file's
	// name ends with.
	Key string
	// Data is the file's content.
	Data []byte
	// Secret marks content that never goes into a log, a result or the
	// domain definition.
	Secret bool
}

// checkValues adds what a job of a valued kind (Kind.Valued: systemd
// credentials) needs beyond its fields: its secrets resolve (each problem
// under its field) and its values fit the job's delivery. It returns the
// values (nil with a problem).
func checkValues(j *job.Job, sd secrets.Dir, r *job.Report) []credentials.Credential {
	var sr job.Report
	for name, secret := range j.CredentialSecrets {
		if !job.ValidSecretName(secret) {
			continue // Validate reports it
		}
		if _, err := sd.Read(secret); err != nil {
			addSecretError(&sr, "credential_secrets."+name, secret, err)
		}
	}
	for i, u := range j.Users {
		if u.PasswordSecret == "" || !job.ValidSecretName(u.PasswordSecret) {
			continue
		}
		f := fmt.Sprintf("users[%d].password_secret", i)
		if b, err := sd.Read(u.PasswordSecret); err != nil {
			addSecretError(&sr, f, u.PasswordSecret, err)
		} else if len(b) == 0 || string(b) == "\n" {
			sr.Add(f, job.CodeInvalid, "secret %q is empty", u.PasswordSecret)
		}
	}
	if !sr.OK() {
		r.Merge(sr)
		return nil
	}
	creds, err := credentials.FromJob(j, sd)
	if err != nil {
		r.Add("", job.CodeInvalid, "%v", err)
		return nil
	}
	if errs := credentials.Check(creds, j.CredentialsDelivery); len(errs) > 0 {
		r.Merge(job.Report{Errors: errs})
		return nil
	}
	return creds
}

// Shape says what r is on the host: one file, several named files or
// none, as its kind and delivery say.
func (r *Rendered) Shape() Shape {
	switch {
	case !kinds.IsValued(r.Job.Format):
		return ShapeImage
	case r.Delivery() == kinds.DeliverySMBIOS:
		return ShapeInline
	}
	return ShapeParts
}

// ContentHash is the content identity of r (64 hex digits): a new content
// gives new file names. For named values it covers every name and the
// values that are not secrets (a file name is in the domain definition,
// which read-only libvirt clients see: no digest of a secret goes there).
func (r *Rendered) ContentHash() string {
	if r.Docs != nil {
		return r.Docs.ContentHash
	}
	h := sha256.New()
	fmt.Fprintf(h, "vmpayload values 1\x00%s\x00", r.Delivery())
	for _, c := range r.creds {
		v := c.Value
		if c.Secret {
			v = []byte("(secret)")
		}
		fmt.Fprintf(h, "%d:%s\x00%d:%s\x00", len(c.Name), c.Name, len(v), v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Inline returns the values a payload of ShapeInline puts into the domain
// definition (SMBIOS OEM strings); nil for another shape.
func (r *Rendered) Inline() []domxml.Credential {
	if r.Shape() != ShapeInline {
		return nil
	}
	out := make([]domxml.Credential, len(r.creds))
	for i, c := range r.creds {
		out[i] = domxml.Credential{Name: c.Name, Value: c.Value}
	}
	return out
}

// Parts returns the files of a payload of ShapeParts, in name order; nil
// for another shape.
func (r *Rendered) Parts() []Part {
	if r.Shape() != ShapeParts {
		return nil
	}
	out := make([]Part, len(r.creds))
	for i, c := range r.creds {
		out[i] = Part{Name: domxml.CredentialFwCfgName(c.Name), Key: c.Name, Data: c.Value, Secret: c.Secret}
	}
	return out
}

// Names returns the names of a valued payload's values (the credentials'
// names), whatever its shape; nil for documents.
func (r *Rendered) Names() []string {
	if r.creds == nil {
		return nil
	}
	out := make([]string, len(r.creds))
	for i, c := range r.creds {
		out[i] = c.Name
	}
	return out
}

// PartName is the file name of part key of this content for a domain
// (prefix, its UUID): like ImageName, a new content gives new names.
func (r *Rendered) PartName(prefix, key string) string {
	return prefix + "-" + r.ContentHash()[:16] + "." + key
}

// WritePart writes one part file atomically (temporary file, fsync,
// rename) with PartMode and opt.GID; with opt.ExpectSHA256 set, data of
// another digest is refused (image.ErrChecksum) and nothing is written.
func WritePart(ctx context.Context, out string, data []byte, opt Options) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if fi, err := os.Lstat(out); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("writing %s: it exists and is a %s; refusing to replace it", out, image.FileKind(fi.Mode()))
	}
	return writeAtomic(out, out, data, PartMode, opt)
}

// writeAtomic writes data to out atomically (temporary file, fsync,
// rename) with mode and opt.GID, refusing data of another digest than
// opt.ExpectSHA256 (image.ErrChecksum); name is out as errors name it.
func writeAtomic(out, name string, data []byte, mode os.FileMode, opt Options) error {
	if opt.ExpectSHA256 != "" {
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != opt.ExpectSHA256 {
			return fmt.Errorf("writing %s: %w", name, image.ErrChecksum)
		}
	}
	f, err := atomicfile.Create(filepath.Dir(out), "."+filepath.Base(out)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	f.NoSync = opt.NoSync
	defer f.Abort()
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if opt.GID >= 0 {
		if err := f.Chown(-1, opt.GID); err != nil {
			return fmt.Errorf("writing %s: set group %d: %w", name, opt.GID, err)
		}
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := f.Commit(out); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// PartIntact reports whether the regular file at path holds exactly data
// (never read through a symlink).
func PartIntact(path string, data []byte) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(data)) {
		return false
	}
	got, err := readNoFollow(path, len(data))
	return err == nil && string(got) == string(data)
}
