package domxml

import (
	"strings"
	"sync/atomic"

	"github.com/beevik/etree"
)

// Document is one libvirt domain definition, read once: the text, and
// its tree as etree's reader gives it. Everything vmpayload reads of a
// definition is read from the tree (Identity, UUID, Platform,
// FindPayload and ChooseDevice, FwCfgEntries, ReferencedFiles,
// ChannelPath, Metadata for the recipe), and every edit vmpayload makes
// is made to it (SetPayloadDrive, SetGuestChannel, SetMetadata,
// SetFwCfgFile and their removals), so that what an edit leaves alone is
// written back byte for byte (XML).
//
// The devices vmpayload looks at (disks, controllers) are read from the
// tree on first need and kept until an edit changes the disks. A
// Document is not safe for concurrent use.
type Document struct {
	orig    string
	doc     *etree.Document
	root    *etree.Element
	view    *domainView // read on demand; nil after an edit of the disks
	changed bool
}

// Edit is the name of a Document used for an edit session: the agent
// makes three or four edits to a definition per job, and they share one
// parse and one serialisation. Each edit gives the results and errors a
// session of its own would give on the XML the previous edits produced,
// and XML is the string such a chain of one-edit sessions returns: the
// original document, byte for byte, when no edit changed anything.
type Edit = Document

// parses counts the documents parse read.
var parses atomic.Int64

// Parses returns how many domain documents the process has parsed so far
// (Read, NewEdit and each function that takes a document's text): tests
// and benchmarks count the parses of a job or a hook run with it.
func Parses() int64 { return parses.Load() }

// Read parses domainXML, a <domain> document. Malformed input returns an
// error wrapping ErrInvalidXML.
func Read(domainXML string) (*Document, error) {
	doc, root, err := parse(domainXML)
	if err != nil {
		return nil, err
	}
	return &Document{orig: domainXML, doc: doc, root: root}, nil
}

// NewEdit is Read, for a session of edits.
func NewEdit(domainXML string) (*Edit, error) { return Read(domainXML) }

// XML returns the document with the edits made so far: the original string
// when none changed it.
func (d *Document) XML() (string, error) {
	if !d.changed {
		return d.orig, nil
	}
	return serialize(d.doc)
}

// Identity returns the root element's type attribute and the text of
// <name> and <uuid>, each "" when absent.
func (d *Document) Identity() Identity {
	id := Identity{Type: attrValue(d.root, "type")}
	for _, c := range d.root.ChildElements() {
		switch c.Tag {
		case "name":
			id.Name = elementText(c)
		case "uuid":
			id.UUID = elementText(c)
		}
	}
	return id
}

// UUID returns the domain's <uuid> without surrounding space, or "" when
// the document has none (libvirt then generates one at definition time).
func (d *Document) UUID() string { return strings.TrimSpace(d.Identity().UUID) }

// Platform returns what the definition says of its guest's platform.
func (d *Document) Platform() Platform {
	p := Platform{Arch: d.machine().Arch}
	for _, f := range d.root.ChildElements() {
		if f.Tag == "features" {
			for _, a := range f.ChildElements() {
				if a.Tag == "acpi" {
					p.ACPI = true
				}
			}
		}
	}
	return p
}

// Metadata returns the elements in namespace namespaceURI (whatever
// prefix they carry) directly under the domain's <metadata>, in document
// order: where libvirt keeps one application's metadata (a vmpayload
// recipe).
func (d *Document) Metadata(namespaceURI string) []*etree.Element {
	var out []*etree.Element
	for _, md := range d.root.ChildElements() {
		if md.Tag != "metadata" || NamespaceOf(md) != "" {
			continue
		}
		for _, c := range md.ChildElements() {
			if NamespaceOf(c) == namespaceURI {
				out = append(out, c)
			}
		}
	}
	return out
}

// NamespaceOf returns the namespace of el as a namespace-aware XML
// decoder (encoding/xml) names it: the URI its prefix (or, without one,
// the default namespace) is bound to in scope; "" for no namespace; the
// prefix itself when it is bound to nothing.
func NamespaceOf(el *etree.Element) string {
	if el.Space == "" {
		return el.NamespaceURI()
	}
	return prefixURI(el, el.Space)
}

// AttrNamespace returns the namespace of attribute a of el as
// NamespaceOf does for elements: "" without a prefix (attributes take no
// default namespace), "xmlns" for a namespace declaration.
func AttrNamespace(el *etree.Element, a etree.Attr) string {
	switch a.Space {
	case "", "xmlns":
		return a.Space
	}
	return prefixURI(el, a.Space)
}

// prefixURI resolves prefix in el's scope.
func prefixURI(el *etree.Element, prefix string) string {
	if prefix == "xml" {
		return "http://www.w3.org/XML/1998/namespace"
	}
	for e := el; e != nil; e = e.Parent() {
		for _, a := range e.Attr {
			if a.Space == "xmlns" && a.Key == prefix {
				return a.Value
			}
		}
	}
	return prefix
}

// machine returns the domain's type, architecture and machine type: the
// root's type attribute and the last <os><type>'s arch and machine.
func (d *Document) machine() machineInfo {
	mi := machineInfo{Type: attrValue(d.root, "type")}
	for _, os := range d.root.ChildElements() {
		if os.Tag != "os" {
			continue
		}
		for _, t := range os.ChildElements() {
			if t.Tag == "type" {
				mi.Arch = attrOr(t, "arch", mi.Arch)
				mi.Machine = attrOr(t, "machine", mi.Machine)
			}
		}
	}
	return mi
}

// attrValue returns the value of el's attribute key, whatever its prefix
// (the last one when there are several, as a decoder fills a field), or
// "".
func attrValue(el *etree.Element, key string) string { return attrOr(el, key, "") }

// attrOr is attrValue with def for an absent attribute.
func attrOr(el *etree.Element, key, def string) string {
	if v, ok := lookupAttr(el, key); ok {
		return v
	}
	return def
}

// lookupAttr returns the value of el's attribute key (any prefix, the
// last one) and whether there is one. As for encoding/xml, whose
// attribute fields match by local name, a prefix is any prefix, even
// xmlns.
func lookupAttr(el *etree.Element, key string) (string, bool) {
	for i := len(el.Attr) - 1; i >= 0; i-- {
		if a := el.Attr[i]; a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// elementText returns the character data directly inside el (text and
// CDATA, across comments; not that of child elements), as a decoder
// fills a string field.
func elementText(el *etree.Element) string {
	var b strings.Builder
	for _, t := range el.Child {
		if cd, ok := t.(*etree.CharData); ok {
			b.WriteString(cd.Data)
		}
	}
	return b.String()
}
