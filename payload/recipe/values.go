package recipe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/beevik/etree"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

// A recipe of a valued payload (Kind.Valued: systemd credentials) names
// no image: it lists the payload's values by name, and for a payload of
// files (payload.ShapeParts, fw_cfg) each value's file:
//
//	<vmpayload:recipe xmlns:vmpayload="NS" version="1">
//	  <vmpayload:values format="credentials" content-hash="…">
//	    <vmpayload:value name="system.hostname"/>
//	    <vmpayload:value name="app.token" path="…" size="12"/>
//	    <vmpayload:value name="firstboot.timezone" path="…" size="3" sha256="…"/>
//	  </vmpayload:values>
//	  <vmpayload:sealed key="…">…</vmpayload:sealed>
//	</vmpayload:recipe>
//
// A secret value's file has no sha256 (a digest of a secret is a guessing
// oracle, and domain metadata is readable by read-only libvirt clients):
// Rebuild takes such a file as intact when it has the recorded size, and
// otherwise writes what the secret now holds. The names are how a delivery
// without files (SMBIOS) knows the entries it set (Values).

// Value is one value of a valued payload's recipe.
type Value struct {
	// Name is the value's name (a credential's).
	Name string
	// Path, Size and SHA256 describe its file ("" for a payload without
	// files; SHA256 "" for a secret).
	Path   string
	Size   int64
	SHA256 string
}

// valued reports whether r describes named values rather than an image.
func (r *Recipe) valued() bool { return kinds.IsValued(r.Format) }

// Files returns the payload files r describes: its image, the files of its
// values, or none (values that live in the definition).
func (r *Recipe) Files() []string {
	if !r.valued() {
		return []string{r.Path}
	}
	var out []string
	for _, v := range r.Values {
		if v.Path != "" {
			out = append(out, v.Path)
		}
	}
	return out
}

// Names returns the names of r's values (nil for an image's recipe).
func (r *Recipe) Names() []string {
	var out []string
	for _, v := range r.Values {
		out = append(out, v.Name)
	}
	return out
}

// NewValues returns the recipe of the valued payload rd, whose part files
// (payload.ShapeParts) were written at paths[key]; paths is nil for a
// payload without files (payload.ShapeInline).
func NewValues(rd *payload.Rendered, paths map[string]string) (*Recipe, error) {
	if rd == nil || !kinds.IsValued(rd.Job.Format) {
		return nil, fmt.Errorf("making a recipe: no rendered values")
	}
	j := normalise(rd.Job)
	rc := &Recipe{Job: j, Format: j.Format, Media: j.Media, ContentHash: rd.ContentHash()}
	parts := rd.Parts()
	if rd.Shape() == payload.ShapeParts {
		for _, p := range parts {
			v := Value{Name: p.Key, Path: paths[p.Key], Size: int64(len(p.Data))}
			if !p.Secret {
				sum := sha256.Sum256(p.Data)
				v.SHA256 = hex.EncodeToString(sum[:])
			}
			rc.Values = append(rc.Values, v)
		}
	} else {
		for _, n := range rd.Names() {
			rc.Values = append(rc.Values, Value{Name: n})
		}
	}
	if err := rc.Check(); err != nil {
		return nil, fmt.Errorf("making a recipe: %w", err)
	}
	return rc, nil
}

// checkValues is Check's part for a valued recipe.
func (r *Recipe) checkValues() error {
	switch {
	case r.Path != "" || r.SHA256 != "" || r.Size != 0 || r.Label != "" || r.InstanceID != "" || r.ISOLayout != 0:
		return fieldErr("values", "a recipe of values has no image")
	case r.Media != "":
		return fieldErr("values", "values have no media")
	case !isHex64(r.ContentHash):
		return fieldErr("values@content-hash", "%q is not a lowercase hex SHA-256", r.ContentHash)
	}
	files := 0
	seen := map[string]bool{}
	for i, v := range r.Values {
		f := fmt.Sprintf("value[%d]", i)
		switch {
		case v.Name == "" || strings.ContainsAny(v.Name, "/=: \x00") || v.Name == "." || v.Name == ".." || len(v.Name) > 255:
			return fieldErr(f+"@name", "%q is not a value's name", abbreviate(v.Name))
		case seen[v.Name]:
			return fieldErr(f+"@name", "%q appears twice", v.Name)
		case v.Path == "" && (v.Size != 0 || v.SHA256 != ""):
			return fieldErr(f, "a value without a file has no size or sha256")
		case v.Path != "" && (!filepath.IsAbs(v.Path) || filepath.Clean(v.Path) != v.Path || hasDotDot(v.Path)):
			return fieldErr(f+"@path", "%q is not an absolute clean path", v.Path)
		case v.Path != "" && !strings.HasSuffix(v.Path, "."+v.Name):
			return fieldErr(f+"@path", "%q is not the file of value %q", v.Path, v.Name)
		case v.Size < 0:
			return fieldErr(f+"@size", "%d is not a size", v.Size)
		case v.SHA256 != "" && !isHex64(v.SHA256):
			return fieldErr(f+"@sha256", "%q is not a lowercase hex SHA-256", v.SHA256)
		}
		seen[v.Name] = true
		if v.Path != "" {
			files++
		}
	}
	if files != 0 && files != len(r.Values) {
		return fieldErr("values", "either every value has a file or none has")
	}
	if r.Sealed() {
		return nil
	}
	j := r.Job
	switch {
	case j.Format != r.Format:
		return fieldErr("job.format", "%q differs from the values' format %q", j.Format, r.Format)
	case j.Media != r.Media:
		return fieldErr("job.media", "%q differs from the values' media %q", j.Media, r.Media)
	case j.ID != "" || j.Action != "" || j.DomainXML != "":
		return fieldErr("job", "a recipe's job carries no id, action or domain_xml")
	}
	if rep := j.Validate(); !rep.OK() {
		e := rep.Errors[0]
		return fieldErr("job."+e.Field, "%s", e.Message)
	}
	return nil
}

// valuesAD is the part of a valued recipe's associated data that binds
// the sealed job to its values ("" for an image's recipe, whose
// associated data is as it always was).
func (r *Recipe) valuesAD() string {
	if !r.valued() {
		return ""
	}
	var b strings.Builder
	for _, v := range r.Values {
		fmt.Fprintf(&b, "\x00%s\x00%s\x00%d\x00%s", v.Name, v.Path, v.Size, v.SHA256)
	}
	return b.String()
}

// renderValues writes the values element of a valued recipe.
func (r *Recipe) renderValues(b *strings.Builder, attr func(name, v string)) {
	b.WriteString("<" + Prefix + ":values")
	attr("format", string(r.Format))
	attr("content-hash", r.ContentHash)
	b.WriteString(">")
	for _, v := range r.Values {
		b.WriteString("<" + Prefix + ":value")
		attr("name", v.Name)
		if v.Path != "" {
			attr("path", v.Path)
			attr("size", strconv.FormatInt(v.Size, 10))
			if v.SHA256 != "" {
				attr("sha256", v.SHA256)
			}
		}
		b.WriteString("/>")
	}
	b.WriteString("</" + Prefix + ":values>")
}

// parseValues reads the values element t into r.
func parseValues(r *Recipe, t *etree.Element) error {
	seen := map[string]bool{}
	for _, a := range t.Attr {
		if isNamespaceDecl(a) {
			continue
		}
		if ns := domxml.AttrNamespace(t, a); ns != "" {
			return fieldErr("values@"+a.Key, "unknown attribute (namespace %q)", ns)
		}
		seen[a.Key] = true
		switch a.Key {
		case "format":
			r.Format = job.Format(a.Value)
		case "content-hash":
			r.ContentHash = a.Value
		default:
			return fieldErr("values@"+a.Key, "unknown attribute")
		}
	}
	for _, k := range []string{"format", "content-hash"} {
		if !seen[k] {
			return fieldErr("values@"+k, "missing")
		}
	}
	if !kinds.IsValued(r.Format) {
		return fieldErr("values@format", "%q is not a format of named values", r.Format)
	}
	for _, tok := range t.Child {
		switch c := tok.(type) {
		case *etree.CharData:
			if len(strings.TrimSpace(c.Data)) > 0 {
				return fieldErr("values", "unexpected text %q", abbreviate(c.Data))
			}
		case *etree.Element:
			if domxml.NamespaceOf(c) != Namespace || c.Tag != "value" {
				return fieldErr(c.Tag, "unexpected element in the values")
			}
			var v Value
			hasSize := false
			for _, a := range c.Attr {
				if isNamespaceDecl(a) {
					continue
				}
				switch {
				case domxml.AttrNamespace(c, a) != "":
					return fieldErr("value@"+a.Key, "unknown attribute")
				case a.Key == "name":
					v.Name = a.Value
				case a.Key == "path":
					v.Path = a.Value
				case a.Key == "sha256":
					v.SHA256 = a.Value
				case a.Key == "size":
					n, err := strconv.ParseInt(a.Value, 10, 64)
					if err != nil {
						return fieldErr("value@size", "%q is not a number", abbreviate(a.Value))
					}
					v.Size, hasSize = n, true
				default:
					return fieldErr("value@"+a.Key, "unknown attribute")
				}
			}
			if v.Path != "" && !hasSize {
				return fieldErr("value@size", "missing")
			}
			if err := expectEnd(c, "value"); err != nil {
				return err
			}
			r.Values = append(r.Values, v)
		}
	}
	return nil
}

// rebuildValues is Rebuild for a valued recipe: every value's file is in
// place (a recipe without files has nothing to rebuild), or the job is
// rendered again and each missing or different file written.
func rebuildValues(ctx context.Context, r *Recipe, opt RebuildOptions) (Outcome, error) {
	what := "the payload files of " + strings.Join(r.Names(), ", ")
	var todo []Value
	for _, v := range r.Values {
		if v.Path == "" {
			continue
		}
		if err := checkPath(v.Path, opt.PayloadDir); err != nil {
			return "", err
		}
		if err := checkOwnName(v.Path, opt.DomainUUID); err != nil {
			return "", err
		}
		what := "file"
		if v.SHA256 != "" {
			what = "image"
		}
		intact, err := hasSHA256(v.Path, what, v.Size, v.SHA256)
		if err != nil {
			return "", err
		}
		if !intact {
			todo = append(todo, v)
		}
	}
	if len(todo) == 0 {
		return OutcomeIntact, nil
	}
	r, checked, err := openChecked(r, opt, what, "the")
	if err != nil {
		return "", err
	}
	rd, err := payload.Render(checked, payload.Options{})
	if err != nil {
		return "", fmt.Errorf("rebuilding %s: %s", what, oneLine(err))
	}
	if rd.ContentHash() != r.ContentHash {
		return "", fmt.Errorf("rebuilding %s: %w: the job's values changed since they were recorded; nothing was written", what, ErrContentChanged)
	}
	parts := rd.Parts()
	for _, v := range todo {
		i := slices.IndexFunc(parts, func(p payload.Part) bool { return p.Key == v.Name })
		if i < 0 {
			return "", fmt.Errorf("rebuilding %s: the job has no value %q any more; nothing was written", what, v.Name)
		}
		err := payload.WritePart(ctx, v.Path, parts[i].Data, payload.Options{GID: opt.GID, ExpectSHA256: v.SHA256})
		if errors.Is(err, image.ErrChecksum) {
			return "", fmt.Errorf("rebuilding %s: %w: value %q changed since it was recorded", what, ErrContentChanged, v.Name)
		}
		if err != nil {
			return "", fmt.Errorf("rebuilding %s: %s", what, oneLine(err))
		}
	}
	return OutcomeRebuilt, nil
}

// InlineNames returns the names of r's values that have no file (values
// that live in the domain definition: SMBIOS OEM strings).
func (r *Recipe) InlineNames() []string {
	var out []string
	for _, v := range r.Values {
		if v.Path == "" {
			out = append(out, v.Name)
		}
	}
	return out
}
