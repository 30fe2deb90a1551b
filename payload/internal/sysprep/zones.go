package sysprep

import (
	_ "embed"
	"strings"
	"sync"
)

//go:generate go test -run TestWindowsZonesMatchCLDR -update

// zonesTable is the Unicode CLDR's Windows zone mapping
// (supplemental/windowsZones.xml: every zone of every territory), as
// TestWindowsZonesMatchCLDR -update writes it: a line per Windows zone
// name, sorted, then a tab and the IANA names mapped to it.
//
//go:embed zones.txt
var zonesTable string

// windowsZoneTable holds the parsed table, built on first use, not at
// every start of a program that links the package.
type windowsZoneTable struct {
	names  []string          // the Windows zone names, sorted
	lower  map[string]string // lower-case Windows name → its own case
	ofIANA map[string]string // IANA name → Windows name
}

var windowsZoneTables = sync.OnceValue(func() windowsZoneTable {
	t := windowsZoneTable{lower: map[string]string{}, ofIANA: map[string]string{}}
	for line := range strings.Lines(zonesTable) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		w, ianas, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		t.names = append(t.names, w)
		t.lower[strings.ToLower(w)] = w
		for _, iana := range strings.Fields(ianas) {
			t.ofIANA[iana] = w
		}
	}
	return t
})

// WindowsZone returns the Windows time zone name for tz: tz itself when it
// is a Windows time zone name (case as Windows writes it, matched without
// regard to case), or the Windows zone of an IANA zone name, by the
// mapping of the Unicode CLDR. false when tz is neither.
func WindowsZone(tz string) (string, bool) {
	t := windowsZoneTables()
	if w, ok := t.lower[strings.ToLower(tz)]; ok {
		return w, true
	}
	w, ok := t.ofIANA[tz]
	return w, ok
}

// IsWindowsZone reports whether name is a Windows time zone name (any
// case).
func IsWindowsZone(name string) bool {
	_, ok := windowsZoneTables().lower[strings.ToLower(name)]
	return ok
}
