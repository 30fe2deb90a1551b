package image

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// validateSpec checks a Spec and returns the sorted set of implied directories.
// Every error wraps ErrInvalidSpec.
func validateSpec(spec Spec) (dirs []string, err error) {
	switch spec.Media {
	case MediaISO, MediaVFAT, MediaFloppy:
	default:
		return nil, fmt.Errorf("%w: unknown media %q (want %q, %q or %q)", ErrInvalidSpec, spec.Media, MediaISO, MediaVFAT, MediaFloppy)
	}
	if err := validateLabel(spec.Media, spec.Label); err != nil {
		return nil, err
	}
	if len(spec.Entries) == 0 {
		return nil, fmt.Errorf("%w: no entries", ErrInvalidSpec)
	}
	var total int64
	files := make(map[string]bool, len(spec.Entries))
	dirSet := map[string]bool{}
	for i, e := range spec.Entries {
		if err := validatePath(spec.Media, e.Path); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrInvalidSpec, i, err)
		}
		if files[e.Path] {
			return nil, fmt.Errorf("%w: entry %d: duplicate path %q", ErrInvalidSpec, i, e.Path)
		}
		files[e.Path] = true
		total += int64(len(e.Data))
		if total > MaxContentBytes {
			return nil, fmt.Errorf("%w: %w: total content exceeds %d bytes at entry %q", ErrInvalidSpec, ErrTooLarge, MaxContentBytes, e.Path)
		}
		for d := path.Dir(e.Path); d != "."; d = path.Dir(d) {
			dirSet[d] = true
		}
	}
	for d := range dirSet {
		if files[d] {
			return nil, fmt.Errorf("%w: %q is both a file and a directory", ErrInvalidSpec, d)
		}
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs, nil
}

func validateLabel(m Media, label string) error {
	limit := MaxISOLabel
	bad := "" // characters not allowed besides controls and non-ASCII
	if isFAT(m) {
		limit = MaxVFATLabel
		bad = "\"*+,./:;<=>?[\\]|"
	}
	if label == "" {
		return fmt.Errorf("%w: empty label", ErrInvalidSpec)
	}
	if len(label) > limit {
		return fmt.Errorf("%w: label %q is %d characters, %s allows at most %d", ErrInvalidSpec, label, len(label), m, limit)
	}
	if strings.TrimSpace(label) != label {
		return fmt.Errorf("%w: label %q has leading or trailing blanks", ErrInvalidSpec, label)
	}
	for _, r := range label {
		if r < 0x20 || r > 0x7e || strings.ContainsRune(bad, r) {
			return fmt.Errorf("%w: label %q contains character %q not allowed on %s", ErrInvalidSpec, label, r, m)
		}
	}
	return nil
}

// maxNameLen is the longest path component we accept, in characters
// (UTF-16 code units): Joliet's limit (Rock Ridge and FAT long names
// handle 255). maxNameBytes bounds its UTF-8 form, so that a Rock Ridge
// directory record (NM carries the name) stays within 255 bytes.
const (
	maxNameLen   = 64
	maxNameBytes = 128
)

// jolietForbidden are the characters Joliet does not allow in a name
// besides controls, '/' and '\\' (refused for every image).
const jolietForbidden = "*:;?"

func validatePath(m Media, p string) error {
	if p == "" {
		return fmt.Errorf("empty path")
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q is absolute", p)
	}
	if strings.Contains(p, "\\") {
		return fmt.Errorf("path %q contains a backslash", p)
	}
	if path.Clean(p) != p {
		return fmt.Errorf("path %q is not clean (empty, '.' or '..' component, or trailing slash)", p)
	}
	depth := 0
	for _, c := range strings.Split(p, "/") {
		depth++
		if c == ".." || c == "." || c == "" {
			return fmt.Errorf("path %q has a %q component", p, c)
		}
		if !utf8.ValidString(c) {
			return fmt.Errorf("path %q is not valid UTF-8", p)
		}
		if n := len(utf16.Encode([]rune(c))); n > maxNameLen {
			return fmt.Errorf("path %q: component %q is %d characters, at most %d allowed (the Joliet limit)", p, c, n, maxNameLen)
		}
		if len(c) > maxNameBytes {
			return fmt.Errorf("path %q: component %q is %d bytes in UTF-8, at most %d allowed", p, c, len(c), maxNameBytes)
		}
		for _, r := range c {
			if m == MediaVFAT && (r < 0x20 || r > 0x7e) {
				return fmt.Errorf("path %q contains character %q (only printable ASCII allowed on vfat)", p, r)
			}
			if r > 0x7e && !unicode.IsPrint(r) || r < 0x20 || r == 0x7f {
				return fmt.Errorf("path %q contains character %q (only printable characters allowed)", p, r)
			}
			if isFAT(m) && strings.ContainsRune("\"*:<>?|", r) {
				return fmt.Errorf("path %q contains character %q not allowed on vfat", p, r)
			}
		}
	}
	if depth > 8 {
		return fmt.Errorf("path %q is deeper than 8 levels", p)
	}
	return nil
}

// validateJoliet checks that every name of spec can be written to a Joliet
// tree as it is (ISOLayoutJolietTree): characters of the Basic
// Multilingual Plane only (Joliet is UCS-2), none of "*:;?" (Joliet
// forbids them), no trailing '.' (Joliet readers, Windows and Linux, drop
// it). Errors wrap ErrInvalidSpec and name the entry.
func validateJoliet(spec Spec) error {
	for i, e := range spec.Entries {
		for _, c := range strings.Split(e.Path, "/") {
			for _, r := range c {
				switch {
				case r > 0xffff:
					return fmt.Errorf("%w: entry %d: path %q contains %q (U+%04X), outside the Basic Multilingual Plane: Joliet names (what Windows reads) are UCS-2", ErrInvalidSpec, i, e.Path, r, r)
				case strings.ContainsRune(jolietForbidden, r):
					return fmt.Errorf("%w: entry %d: path %q contains %q, which Joliet names (what Windows reads) cannot hold (none of %s)", ErrInvalidSpec, i, e.Path, r, jolietForbidden)
				}
			}
			if strings.HasSuffix(c, ".") {
				return fmt.Errorf("%w: entry %d: path %q: component %q ends with '.', which Joliet readers (Windows, Linux) drop", ErrInvalidSpec, i, e.Path, c)
			}
		}
	}
	return nil
}
