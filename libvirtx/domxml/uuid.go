package domxml

import "strings"

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
