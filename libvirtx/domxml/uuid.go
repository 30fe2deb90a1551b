package domxml

import (
	"encoding/xml"
	"strings"
)

// IsUUID reports whether s has the shape of a textual libvirt UUID: 32 hex
// digits, with or without the four dashes of the 8-4-4-4-12 form. It is
// the one definition of the shape: the job validator and the host's lookup
// (UUID first, then name) both use it.
func IsUUID(s string) bool {
	hex := 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'f', r >= 'A' && r <= 'F':
			hex++
		case r == '-':
		default:
			return false
		}
	}
	return hex == 32 && (len(s) == 32 || len(s) == 36)
}

// CanonicalUUID returns a UUID IsUUID accepts in libvirt's form: lower
// case, 8-4-4-4-12. Anything else is returned unchanged.
func CanonicalUUID(s string) string {
	if !IsUUID(s) {
		return s
	}
	h := strings.ToLower(strings.ReplaceAll(s, "-", ""))
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Identity is what names a domain definition: the root element's type
// attribute, <name> and <uuid> (each "" when absent).
type Identity struct {
	Type, Name, UUID string
}

// ReadIdentity reads the Identity of a <domain> document without judging
// the rest of it (libvirt does, when the document is defined). Its error
// is encoding/xml's, unwrapped, for messages that quote it.
//
// The document is read (Read) for its Identity; only one Read refuses is
// decoded by encoding/xml, which gives the identity or the error of a
// decoder that stops at the root's end (as before the Document).
func ReadIdentity(domainXML string) (Identity, error) {
	if d, err := Read(domainXML); err == nil {
		return d.Identity(), nil
	}
	var root struct {
		XMLName xml.Name `xml:"domain"`
		Type    string   `xml:"type,attr"`
		Name    string   `xml:"name"`
		UUID    string   `xml:"uuid"`
	}
	if err := xml.NewDecoder(strings.NewReader(domainXML)).Decode(&root); err != nil {
		return Identity{}, err
	}
	return Identity{Type: root.Type, Name: root.Name, UUID: root.UUID}, nil
}

// SameUUID reports whether a and b are the same UUID in any of the
// spellings IsUUID accepts.
func SameUUID(a, b string) bool {
	return IsUUID(a) && IsUUID(b) && CanonicalUUID(a) == CanonicalUUID(b)
}
