package sysprep

import (
	"strings"
	"sync"
)

//go:generate go test -run TestWindowsZonesMatchCLDR -update

// WindowsZone returns the Windows time zone name for tz: tz itself when it
// is a Windows time zone name (case as Windows writes it, matched without
// regard to case), or the Windows zone of an IANA zone name, by the
// mapping of the Unicode CLDR (supplemental/windowsZones.xml: every zone
// of every territory). false when tz is neither.
func WindowsZone(tz string) (string, bool) {
	if w, ok := windowsByLower()[strings.ToLower(tz)]; ok {
		return w, true
	}
	w, ok := windowsOfIANA()[tz]
	return w, ok
}

// IsWindowsZone reports whether name is a Windows time zone name (any
// case).
func IsWindowsZone(name string) bool {
	_, ok := windowsByLower()[strings.ToLower(name)]
	return ok
}

// windowsByLower maps the lower-case Windows zone names to theirs, built on
// first use.
var windowsByLower = sync.OnceValue(func() map[string]string {
	m := make(map[string]string, len(windowsZones))
	for _, w := range windowsZones {
		m[strings.ToLower(w)] = w
	}
	return m
})
