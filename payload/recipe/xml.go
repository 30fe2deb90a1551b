package recipe

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/beevik/etree"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
)

// Element renders the recipe as the element to place inside a domain's
// <metadata> (for virDomainSetMetadata: key Prefix, uri Namespace):
//
//	<vmpayload:recipe xmlns:vmpayload="NS" version="1">
//	  <vmpayload:image path="…" sha256="…" size="…" format="…" media="…"
//	      label="…" instance-id="…" content-hash="…" iso-layout="2"/>
//	  <vmpayload:sealed key="KEY-ID">{base64 of the sealed job JSON}</vmpayload:sealed>
//	</vmpayload:recipe>
//
// The job is sealed with keys' current key, bound to the image attributes
// (package internal/seal): domain metadata is readable by read-only libvirt
// clients, and the job holds password hashes, inline contents and seeds.
// A recipe read sealed and not opened renders its blob as it was read.
// keys may be nil only for such a recipe.
//
// iso-layout is written for an ISO image of a layout after
// image.ISOLayoutGoDiskfs, which its absence means (so a recipe of that
// layout renders as it did before issue 35). The output is deterministic:
// the same recipe and key give the same text.
func (r *Recipe) Element(keys *seal.Keyring) (string, error) {
	return r.render(keys, false)
}

// render is Element; with clear it writes the job in clear, as every
// recipe before sealing was written (tests of that form).
func (r *Recipe) render(keys *seal.Keyring, clear bool) (string, error) {
	if err := r.Check(); err != nil {
		return "", fmt.Errorf("rendering the recipe element: %w", err)
	}
	keyID, blob := r.sealedKey, r.sealedBlob
	var js []byte
	if clear {
		if r.Sealed() {
			return "", fmt.Errorf("rendering the recipe element: the job is sealed")
		}
		var err error
		if js, err = r.jobJSON(); err != nil {
			return "", err
		}
	} else if !r.Sealed() {
		if keys == nil {
			return "", fmt.Errorf("rendering the recipe element: no key to seal the job with")
		}
		js, err := r.jobJSON()
		if err != nil {
			return "", err
		}
		keyID, blob = keys.Seal(js, r.associatedData())
	}
	var b strings.Builder
	attr := func(name, v string) {
		b.WriteString(" " + name + `="`)
		_ = xml.EscapeText(&b, []byte(v)) // strings.Builder never fails
		b.WriteString(`"`)
	}
	fmt.Fprintf(&b, `<%s:recipe xmlns:%s="%s" version="%d">`, Prefix, Prefix, Namespace, Version)
	if r.valued() {
		r.renderValues(&b, attr)
	} else {
		r.renderImage(&b, attr)
	}
	if clear {
		b.WriteString("<" + Prefix + ":job>")
		writeText(&b, js)
		b.WriteString("</" + Prefix + ":job>")
	} else {
		b.WriteString("<" + Prefix + ":sealed")
		attr("key", keyID)
		b.WriteString(">")
		b.WriteString(base64.StdEncoding.EncodeToString(blob))
		b.WriteString("</" + Prefix + ":sealed>")
	}
	b.WriteString("</" + Prefix + ":recipe>")
	return b.String(), nil
}

// renderImage writes the image element of an image's recipe.
func (r *Recipe) renderImage(b *strings.Builder, attr func(name, v string)) {
	b.WriteString("<" + Prefix + ":image")
	attr("path", r.Path)
	attr("sha256", r.SHA256)
	attr("size", strconv.FormatInt(r.Size, 10))
	attr("format", string(r.Format))
	attr("media", string(r.Media))
	attr("label", r.Label)
	attr("instance-id", r.InstanceID)
	attr("content-hash", r.ContentHash)
	if r.isISOImage() && r.ISOLayout != image.ISOLayoutGoDiskfs {
		attr("iso-layout", strconv.Itoa(int(r.ISOLayout)))
	}
	b.WriteString("/>")
}

// MetadataContent turns an element rendered by Element into the form
// virDomainSetMetadata (and virsh metadata --set) takes: the same element
// without the Prefix and its namespace declaration. libvirt puts that
// element and its children into the namespace uri under prefix key itself,
// and refuses one that already declares the prefix ("failed to create a new
// XML namespace", libvirt 9.0). Text and attribute values are escaped, so
// no "<" of theirs is touched.
func MetadataContent(element string) string {
	return metadataUnprefix.Replace(element)
}

var metadataUnprefix = strings.NewReplacer(
	" xmlns:"+Prefix+`="`+Namespace+`"`, "",
	"</"+Prefix+":", "</",
	"<"+Prefix+":", "<",
)

// writeText writes js, the job's JSON, as XML character data, escaping
// only what text needs: '&', '<', '>' and '\r' (which a parser would turn
// into '\n'). xml.EscapeText also escapes both quotes, and JSON is mostly
// quotes: as "&#34;" the text was a third longer and three times slower
// for the agent to parse back (encoding/xml decodes each reference on a
// slow path). Readers get the same text either way, and libvirt writes it
// back with bare quotes (libxml2 escapes quotes only in attributes).
//
// The two characters JSON may carry raw that XML has no place for,
// U+FFFE and U+FFFF (json.Marshal escapes control characters and replaces
// invalid UTF-8), are written as the JSON escapes \ufffe and \uffff,
// which decode to the same string (xml.EscapeText replaced them with
// U+FFFD, changing the job).
func writeText(b *strings.Builder, js []byte) {
	last := 0
	for i := 0; i < len(js); i++ {
		var esc string
		n := 1
		switch c := js[i]; c {
		case '&':
			esc = "&amp;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '\r':
			esc = "&#xD;"
		case 0xEF: // U+FFFE and U+FFFF are EF BF BE and EF BF BF
			if i+2 >= len(js) || js[i+1] != 0xBF || js[i+2] != 0xBE && js[i+2] != 0xBF {
				continue
			}
			esc, n = `\ufffe`, 3
			if js[i+2] == 0xBF {
				esc = `\uffff`
			}
		default:
			continue
		}
		b.Write(js[last:i])
		b.WriteString(esc)
		last = i + n
		i += n - 1
	}
	b.Write(js[last:])
}

// MaxDomainXML bounds the domain XML FromDomainXML reads (libvirt's own
// limit for a domain definition is 10 MiB).
const MaxDomainXML = 16 << 20

// FromDomainXML reads domainXML (domxml.Read) and its recipe
// (FromDocument). A definition that is not a well-formed <domain>
// document is an error.
func FromDomainXML(domainXML string) (*Recipe, bool, error) {
	_, r, ok, err := ReadDomainXML(domainXML)
	return r, ok, err
}

// ReadDomainXML is FromDomainXML that also returns the Document read, for
// the other questions a caller asks of the definition (nil when it was
// refused).
func ReadDomainXML(domainXML string) (*domxml.Document, *Recipe, bool, error) {
	if len(domainXML) > MaxDomainXML {
		return nil, nil, false, fmt.Errorf("reading the domain XML: %d bytes is more than the %d accepted", len(domainXML), MaxDomainXML)
	}
	d, err := domxml.Read(domainXML)
	if err != nil {
		return nil, nil, false, readError(domainXML, err)
	}
	r, ok, err := FromDocument(d)
	return d, r, ok, err
}

// readError words the error of a definition domxml.Read refused as the
// recipe reader always has: the XML decoder's first error, or a root
// element that is not <domain>. When the decoder finds neither (no root,
// several, text or a repeated attribute around them), a document that
// does not name the recipe namespace has no recipe, as it always had (no
// error; an empty document, for one); one
// that does is refused with err. Only a refused document is decoded
// again.
func readError(domainXML string, err error) error {
	d := xml.NewDecoder(strings.NewReader(domainXML))
	for depth := 0; ; {
		tok, terr := d.Token()
		if terr == io.EOF {
			if !strings.Contains(domainXML, Namespace) {
				return nil
			}
			return fmt.Errorf("reading the domain XML: %w", err)
		}
		if terr != nil {
			return fmt.Errorf("reading the domain XML: %w", terr)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 && (t.Name.Local != "domain" || t.Name.Space != "") {
				return fmt.Errorf("reading the domain XML: the root element is <%s>, not <domain>", t.Name.Local)
			}
			depth++
		case xml.EndElement:
			depth--
		}
	}
}

// FromDocument finds the recipe element under /domain/metadata of the
// definition d (by namespace URI, whatever prefix it carries; CDATA and
// escaped text both work) and parses it strictly. It returns false and no
// error when the domain has no recipe. A recipe that is present but
// malformed — unknown or missing attributes or elements, a bad value, an
// invalid job, a plaintext password — is an error naming the field
// (*FieldError where a field is at fault).
func FromDocument(d *domxml.Document) (*Recipe, bool, error) {
	var found *Recipe
	for _, el := range d.Metadata(Namespace) {
		if el.Tag != "recipe" {
			return nil, false, fieldErr(el.Tag, "unknown element in the recipe namespace")
		}
		if found != nil {
			return nil, false, fieldErr("recipe", "the domain's metadata holds more than one recipe")
		}
		r, err := parseRecipe(el)
		if err != nil {
			return nil, false, err
		}
		found = r
	}
	if found == nil {
		return nil, false, nil
	}
	return found, true, nil
}

// parseRecipe reads the recipe element el.
func parseRecipe(el *etree.Element) (*Recipe, error) {
	version := ""
	for _, a := range el.Attr {
		switch {
		case isNamespaceDecl(a):
		case domxml.AttrNamespace(el, a) == "" && a.Key == "version":
			version = a.Value
		default:
			return nil, fieldErr("recipe@"+a.Key, "unknown attribute")
		}
	}
	switch version {
	case strconv.Itoa(Version):
	case "":
		return nil, fieldErr("recipe@version", "missing")
	default:
		return nil, fieldErr("recipe@version", "version %q is not supported; this vmpayload reads version %d", version, Version)
	}
	r := &Recipe{}
	var haveImage, haveJob, haveSealed bool
	var jobText []byte
	for _, tok := range el.Child {
		switch t := tok.(type) {
		case *etree.CharData:
			if len(strings.TrimSpace(t.Data)) > 0 {
				return nil, fieldErr("recipe", "unexpected text %q", abbreviate(t.Data))
			}
		case *etree.Element:
			if ns := domxml.NamespaceOf(t); ns != Namespace {
				return nil, fieldErr(t.Tag, "unexpected element (namespace %q) in the recipe", ns)
			}
			switch t.Tag {
			case "image":
				if haveImage {
					return nil, fieldErr("image", "appears more than once")
				}
				haveImage = true
				if err := parseImage(r, t); err != nil {
					return nil, err
				}
				if err := expectEnd(t, "image"); err != nil {
					return nil, err
				}
			case "values":
				if haveImage {
					return nil, fieldErr("values", "appears more than once, or with an image")
				}
				haveImage = true
				if err := parseValues(r, t); err != nil {
					return nil, err
				}
			case "sealed":
				if haveSealed || haveJob {
					return nil, fieldErr("sealed", "appears more than once, or with a job in clear")
				}
				haveSealed = true
				if err := parseSealed(r, t); err != nil {
					return nil, err
				}
			case "job":
				if haveJob || haveSealed {
					return nil, fieldErr("job", "appears more than once, or with a sealed job")
				}
				haveJob = true
				for _, a := range t.Attr {
					if !isNamespaceDecl(a) {
						return nil, fieldErr("job@"+a.Key, "unknown attribute")
					}
				}
				var err error
				if jobText, err = readText(t, "job", job.MaxJobBytes); err != nil {
					return nil, err
				}
			default:
				return nil, fieldErr(t.Tag, "unknown element in the recipe")
			}
		}
	}
	switch {
	case !haveImage:
		return nil, fieldErr("image", "missing")
	case !haveJob && !haveSealed:
		return nil, fieldErr("job", "missing")
	}
	if haveSealed {
		// the job is checked when opened (Open)
		if err := r.Check(); err != nil {
			return nil, err
		}
		return r, nil
	}
	j, err := parseJob(jobText)
	if err != nil {
		return nil, err
	}
	r.Job = j
	if err := r.Check(); err != nil {
		return nil, err
	}
	return r, nil
}

// parseJob reads a recipe's job JSON (in clear, or opened): valid, without
// id, action or domain_xml, normalised.
func parseJob(text []byte) (job.Job, error) {
	j, rep := job.Parse(text)
	if !rep.OK() {
		e := rep.Errors[0]
		return job.Job{}, fieldErr(strings.TrimSuffix("job."+e.Field, "."), "%s", e.Message)
	}
	for _, f := range []struct{ name, v string }{{"id", j.ID}, {"action", string(j.Action)}, {"domain_xml", j.DomainXML}} {
		if f.v != "" {
			return job.Job{}, fieldErr("job."+f.name, "a recipe's job carries no %s", f.name)
		}
	}
	return normalise(*j), nil
}

// parseSealed reads the sealed element started by t: attribute key (a key
// id, 16 lowercase hex digits) and the base64 blob as text.
func parseSealed(r *Recipe, t *etree.Element) error {
	for _, a := range t.Attr {
		switch {
		case isNamespaceDecl(a):
		case domxml.AttrNamespace(t, a) == "" && a.Key == "key":
			r.sealedKey = a.Value
		default:
			return fieldErr("sealed@"+a.Key, "unknown attribute")
		}
	}
	if _, err := hex.DecodeString(r.sealedKey); err != nil || len(r.sealedKey) != 16 || strings.ToLower(r.sealedKey) != r.sealedKey {
		return fieldErr("sealed@key", "%q is not a key id (16 lowercase hex digits)", abbreviate(r.sealedKey))
	}
	// base64 of a job of at most job.MaxJobBytes, the nonce and the tag
	text, err := readText(t, "sealed", (job.MaxJobBytes+64)/3*4+8)
	if err != nil {
		return err
	}
	blob, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(text)))
	if err != nil || len(blob) == 0 {
		return fieldErr("sealed", "the text is not base64")
	}
	r.sealedBlob = blob
	return nil
}

func parseImage(r *Recipe, t *etree.Element) error {
	seen := map[string]bool{}
	for _, a := range t.Attr {
		if isNamespaceDecl(a) {
			continue
		}
		if ns := domxml.AttrNamespace(t, a); ns != "" {
			return fieldErr("image@"+a.Key, "unknown attribute (namespace %q)", ns)
		}
		seen[a.Key] = true
		switch a.Key {
		case "path":
			r.Path = a.Value
		case "sha256":
			r.SHA256 = a.Value
		case "size":
			n, err := strconv.ParseInt(a.Value, 10, 64)
			if err != nil {
				return fieldErr("image@size", "%q is not a number", abbreviate(a.Value))
			}
			r.Size = n
		case "format":
			r.Format = job.Format(a.Value)
		case "media":
			r.Media = job.Media(a.Value)
		case "label":
			r.Label = a.Value
		case "instance-id":
			r.InstanceID = a.Value
		case "content-hash":
			r.ContentHash = a.Value
		case "iso-layout":
			n, err := strconv.ParseUint(a.Value, 10, 8)
			if err != nil || n == 0 || strconv.FormatUint(n, 10) != a.Value {
				return fieldErr("image@iso-layout", "%q is not a layout number", abbreviate(a.Value))
			}
			r.ISOLayout = image.ISOLayout(n)
		default:
			return fieldErr("image@"+a.Key, "unknown attribute")
		}
	}
	for _, k := range []string{"path", "sha256", "size", "format", "media", "label", "instance-id", "content-hash"} {
		if !seen[k] {
			return fieldErr("image@"+k, "missing")
		}
	}
	if !seen["iso-layout"] && r.isISOImage() {
		r.ISOLayout = image.ISOLayoutGoDiskfs // written before issue 35
	}
	return nil
}

// readText returns the text content of element el (character data and
// CDATA sections, across comments); child elements are an error.
func readText(el *etree.Element, name string, limit int) ([]byte, error) {
	var b []byte
	for _, tok := range el.Child {
		switch t := tok.(type) {
		case *etree.CharData:
			b = append(b, t.Data...)
			if len(b) > limit {
				return nil, fieldErr(name, "more than %d bytes", limit)
			}
		case *etree.Element:
			return nil, fieldErr(name, "unexpected element <%s> inside it", t.Tag)
		}
	}
	return b, nil
}

// expectEnd checks that element el, which must be empty, is.
func expectEnd(el *etree.Element, name string) error {
	for _, tok := range el.Child {
		switch t := tok.(type) {
		case *etree.CharData:
			if len(strings.TrimSpace(t.Data)) > 0 {
				return fieldErr(name, "unexpected text %q", abbreviate(t.Data))
			}
		case *etree.Element:
			return fieldErr(name, "unexpected element <%s>", t.Tag)
		}
	}
	return nil
}

// isNamespaceDecl reports whether a declares a namespace (xmlns or
// xmlns:PREFIX).
func isNamespaceDecl(a etree.Attr) bool {
	return a.Space == "xmlns" || (a.Space == "" && a.Key == "xmlns")
}

func abbreviate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
