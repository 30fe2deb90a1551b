// Package domxml reads and edits libvirt domain XML for vmpayload: it
// finds, adds, replaces and removes the payload drive and the fw_cfg
// entries, and answers the questions the agent, the hook and the recipe
// ask about a domain (name, UUID, platform, referenced files, metadata).
//
// A definition is parsed once, into a Document (Read): etree's tree of
// it, which everything below reads and edits.
//
//   - Reading: Identity (type, name, UUID), Platform, the payload drive
//     (FindPayload) and a free target for one (ChooseDevice), the fw_cfg
//     entries, the files the domain names (ReferencedFiles), a guest
//     channel's socket and the elements of one namespace in <metadata>
//     (where package recipe reads its recipe) are read from the tree. The
//     disks and controllers are read with the values libvirt's typed model
//     (libvirtxml) gives them (domainView); only what vmpayload looks at
//     is read, so elements libvirtxml does not know elsewhere in the
//     domain do not matter. ReferencedFiles walks every <source file=...>
//     under a disk, wherever it sits (backing chains, mirrors, data
//     stores, elements newer than libvirtxml), because a file the orphan
//     GC misses is deleted while in use.
//   - Building the payload drive uses the typed model: it is a
//     libvirtxml.DomainDisk, marshalled by encoding/xml. PayloadDeviceXML
//     (media change, hot-plug, unplug), EjectedDeviceXML (eject) and
//     SetPayloadDrive parse that marshalled element into the tree and
//     write it with etree's writer, so the drive comes out in libvirt's
//     own layout (single-quoted attributes, empty elements closed as
//     <readonly/>). Nothing builds a <disk> by string or element by
//     element. A payload drive rewritten in place keeps its <address>
//     and <boot>, which are decoded from their elements for that.
//   - Editing (the payload drive, the guest channel, the metadata, the
//     fw_cfg entries) is a tree edit on the Document: only the elements
//     vmpayload owns are replaced, inserted or removed, and everything
//     else (elements and attributes libvirtxml may not know, comments,
//     metadata, whitespace) is written back byte for byte. A round trip
//     through the typed model would drop what it does not know. Several
//     edits of one definition (the agent's drive, guest channel and
//     recipe per job) share one parse and one serialisation (Edit is a
//     Document).
//
// The functions that take a string (FindPayload, FwCfgEntries, ...) read
// it into a Document for one answer; a caller that asks several
// questions of one definition reads it once and asks the Document.
//
// Every document is read into a tree by etree's reader (parse); input it
// refuses is tokenized again by encoding/xml (wellFormed) for an error
// that names the fault.
//
// Malformed input returns an error wrapping ErrInvalidXML, never panics.
package domxml

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/beevik/etree"
)

// PayloadAlias is the device alias that marks the payload drive. libvirt
// only keeps user-chosen aliases that start with "ua-", and it keeps them in
// the inactive XML, so the alias identifies the drive across redefinitions.
const PayloadAlias = "ua-vmpayload"

// ErrInvalidXML is wrapped by every error caused by input that is not a
// well-formed libvirt <domain> document.
var ErrInvalidXML = errors.New("invalid domain XML")

// ErrNoFreeTarget is wrapped when no free target device or drive address is
// left on the chosen bus.
var ErrNoFreeTarget = errors.New("no free target on bus")

// parse reads domainXML with etree's reader and returns the document and
// its <domain> root. etree's reader is strict and matches end tags itself;
// the checks it does not make (an attribute given twice, text outside the
// root element, a declared encoding, which the strict scan refuses and
// etree would pass through) are made on the tree. Input that fails any of
// them is scanned again (wellFormed) for the error that names the fault.
func parse(domainXML string) (*etree.Document, *etree.Element, error) {
	parses.Add(1)
	doc := etree.NewDocument()
	doc.ReadSettings.PreserveDuplicateAttrs = true // checked below, with a named error
	doc.ReadSettings.CharsetReader = refuseCharset
	if err := doc.ReadFromString(domainXML); err != nil || !treeWellFormed(doc) {
		if werr := wellFormed(domainXML); werr != nil {
			return nil, nil, fmt.Errorf("parsing domain XML: %w: %w", ErrInvalidXML, werr)
		}
		if err == nil {
			err = errors.New("not well-formed")
		}
		return nil, nil, fmt.Errorf("parsing domain XML: %w: %w", ErrInvalidXML, err)
	}
	roots := 0
	for _, t := range doc.Child {
		if _, ok := t.(*etree.Element); ok {
			roots++
		}
	}
	root := doc.Root()
	if root == nil || roots != 1 {
		return nil, nil, fmt.Errorf("parsing domain XML: %w: want exactly one root element, got %d", ErrInvalidXML, roots)
	}
	if root.Space != "" || root.Tag != "domain" {
		return nil, nil, fmt.Errorf("parsing domain XML: %w: root element is <%s>, want <domain>", ErrInvalidXML, root.FullTag())
	}
	return doc, root, nil
}

// errCharset is refuseCharset's error: the strict scan's decoder has no
// charset reader, so a declared encoding other than UTF-8 is refused.
var errCharset = errors.New("declared encoding is not UTF-8")

// refuseCharset is the parse's charset reader: it refuses every encoding
// the decoder would ask it for (UTF-8 never reaches it).
func refuseCharset(string, io.Reader) (io.Reader, error) { return nil, errCharset }

// treeWellFormed makes on a document etree read the checks of the strict
// scan that etree's reader does not make: no attribute given twice in an
// element, no text but whitespace outside the root element.
func treeWellFormed(doc *etree.Document) bool {
	for _, t := range doc.Child {
		if cd, ok := t.(*etree.CharData); ok && len(strings.TrimSpace(cd.Data)) > 0 {
			return false
		}
	}
	return uniqueAttrs(&doc.Element)
}

// uniqueAttrs reports whether no element under (and including) el has an
// attribute twice (same prefix and name, as the scan compares raw names).
func uniqueAttrs(el *etree.Element) bool {
	for i := 1; i < len(el.Attr); i++ {
		for _, a := range el.Attr[:i] {
			if a.Space == el.Attr[i].Space && a.Key == el.Attr[i].Key {
				return false
			}
		}
	}
	for _, t := range el.Child {
		if c, ok := t.(*etree.Element); ok && !uniqueAttrs(c) {
			return false
		}
	}
	return true
}

// wellFormed runs encoding/xml's strict tokenizer over the whole input
// and returns the first fault it finds: tags must match, no attribute may
// be given twice, and nothing but whitespace, comments and processing
// instructions may surround the root element. It reads raw tokens and
// matches end tags to start tags by their names as written (prefix and
// local name), so its messages name the elements as the document does.
func wellFormed(s string) error {
	dec := xml.NewDecoder(strings.NewReader(s))
	dec.Strict = true
	var open []xml.Name // the elements open, outermost first
	for {
		tok, err := dec.RawToken()
		if err == io.EOF {
			if len(open) != 0 {
				return errors.New("unexpected end of input")
			}
			return nil
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			// XML's "Unique Att Spec": libvirt's parser (libxml2) refuses
			// an attribute given twice, and so must we (libvirtxml's
			// decoders fail on it after an edit otherwise).
			for i := 1; i < len(t.Attr); i++ {
				for _, a := range t.Attr[:i] {
					if a.Name == t.Attr[i].Name {
						return fmt.Errorf("attribute %s given twice in <%s>", qualified(a.Name), qualified(t.Name))
					}
				}
			}
			open = append(open, t.Name)
		case xml.EndElement:
			if len(open) == 0 {
				return fmt.Errorf("unexpected end element </%s>", qualified(t.Name))
			}
			if top := open[len(open)-1]; top != t.Name {
				return fmt.Errorf("element <%s> closed by </%s>", qualified(top), qualified(t.Name))
			}
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) == 0 && len(bytes.TrimSpace(t)) > 0 {
				return errors.New("text outside the root element")
			}
		}
	}
}

// qualified writes a raw (untranslated) name as in the document.
func qualified(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}

// serialize writes doc back to a string with libvirt's single-quoted
// attributes.
func serialize(doc *etree.Document) (string, error) {
	doc.WriteSettings.AttrSingleQuote = true
	return doc.WriteToString()
}

// machineInfo is what the domain says about its virtual hardware platform.
type machineInfo struct {
	// Type is the domain type attribute: "kvm", "qemu", "test", ...
	Type string
	// Arch is <os><type arch=...>, possibly "".
	Arch string
	// Machine is <os><type machine=...>, possibly "" (libvirt then picks the
	// architecture's default, "pc" on x86).
	Machine string
}

// IsQ35 reports whether a machine type is a Q35 chipset ("q35",
// "pc-q35-7.2", ...). Q35 has a SATA (AHCI) controller and no IDE bus.
func IsQ35(machine string) bool {
	return strings.Contains(machine, "q35")
}

// IsI440FX reports whether a machine type is the i440FX "pc" chipset ("pc",
// "pc-i440fx-7.2", "pc-1.0", ...), which has an IDE bus and no SATA.
func IsI440FX(machine string) bool {
	return machine == "pc" || (strings.HasPrefix(machine, "pc-") && !IsQ35(machine))
}

// isX86 reports whether arch is an x86 architecture or unspecified.
func isX86(arch string) bool {
	switch arch {
	case "", "x86_64", "i686", "i386":
		return true
	}
	return false
}

// ReferencedFiles returns the file paths of every disk source in the domain,
// including backing stores, and then the files of its fw_cfg entries
// (<sysinfo type='fwcfg'>, where an Ignition config delivered by fw_cfg
// is named), in document order without duplicates. The agent uses it to
// decide which payload files are still referenced (orphan GC).
func (d *Document) ReferencedFiles() []string {
	root := d.root
	var files []string
	seen := map[string]bool{}
	for _, disk := range root.FindElements("./devices/disk") {
		for _, src := range disk.FindElements(".//source[@file]") {
			f := src.SelectAttrValue("file", "")
			if f != "" && !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
	}
	_, ents := fwcfgEntries(root)
	for _, en := range ents {
		if en.File != "" && !seen[en.File] {
			seen[en.File] = true
			files = append(files, en.File)
		}
	}
	return files
}

// targetIndex converts a disk target name such as "hdc" or "sdab" into its
// index (hdc -> 2, sdab -> 27) the way libvirt does, given the prefix.
func targetIndex(dev, prefix string) (int, bool) {
	if !strings.HasPrefix(dev, prefix) || len(dev) == len(prefix) {
		return 0, false
	}
	idx := 0
	for _, r := range dev[len(prefix):] {
		if r < 'a' || r > 'z' {
			return 0, false
		}
		idx = idx*26 + int(r-'a') + 1
		if idx > 1<<20 {
			return 0, false
		}
	}
	return idx - 1, true
}

// targetName is the inverse of targetIndex.
func targetName(prefix string, idx int) string {
	var b []byte
	for n := idx; n >= 0; n = n/26 - 1 {
		b = append([]byte{byte('a' + n%26)}, b...)
	}
	return prefix + string(b)
}

// checkImagePath rejects paths libvirt would misinterpret.
func checkImagePath(p string) error {
	if p == "" {
		return errors.New("image path is empty")
	}
	if !filepath.IsAbs(p) {
		return fmt.Errorf("image path %q is not absolute", p)
	}
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("image path %q contains a NUL byte", p)
	}
	return nil
}

// Platform is what a domain definition says about the platform its guest
// runs on, as far as payload delivery depends on it.
type Platform struct {
	// Arch is <os><type arch=...>, "" when the definition names none
	// (libvirt then uses the host's).
	Arch string
	// ACPI reports whether <features> has <acpi/>.
	ACPI bool
}

// X86 reports whether the platform is x86 (or names no architecture).
func (p Platform) X86() bool { return isX86(p.Arch) }

// NoFwCfg reports whether QEMU has no fw_cfg device on the platform's
// architecture: s390x and ppc64/ppc64le (libvirt fails the start with
// "fw_cfg device not available"), where Ignition reads its config from a
// virtio disk instead.
func (p Platform) NoFwCfg() bool {
	switch p.Arch {
	case "s390x", "s390", "ppc64", "ppc64le", "ppc":
		return true
	}
	return false
}
