package job

import (
	"cmp"

	"github.com/vmpayload/vmpayload/payload/internal/sysprep"
)

// SysprepMedium is the drive a sysprep answer file reaches Windows on.
type SysprepMedium string

// Sysprep media.
const (
	// MediumFloppy is a 1.44 MB vfat floppy image on the domain's floppy
	// controller (what oVirt gives Windows).
	MediumFloppy SysprepMedium = "floppy"
	// MediumCDROM is an ISO image (Joliet, which Windows reads, and Rock
	// Ridge) in a CD-ROM drive.
	MediumCDROM SysprepMedium = "cdrom"
)

// Media is the image media of the medium.
func (m SysprepMedium) Media() Media {
	if m == MediumCDROM {
		return MediaISO
	}
	return MediaVFAT
}

// The answer file names Windows looks for.
const (
	// UnattendXML is what sysprep's specialize and oobeSystem passes of a
	// generalised image read from the root of removable media (and what
	// oVirt names the file on its floppy); the default.
	UnattendXML = "Unattend.xml"
	// AutounattendXML is what Windows Setup (installation from the DVD)
	// looks for at the root of removable media.
	AutounattendXML = "Autounattend.xml"
)

// MaxAdminPasswordBytes is the longest administrator password accepted
// (Windows allows 127 characters; the bytes allow for UTF-8).
const MaxAdminPasswordBytes = 512

// SysprepTimezone returns the Windows time zone name of a job of format
// "sysprep": windows_timezone, or the job's IANA timezone mapped through
// the CLDR table; "" when the job has neither (or an unmapped one, which
// Validate reports).
func SysprepTimezone(j *Job) string {
	if tz := cmp.Or(j.WindowsTimezone, j.Timezone); tz != "" {
		w, _ := sysprep.WindowsZone(tz)
		return w
	}
	return ""
}

// MaxSysprepValueBytes bounds the plain sysprep value fields (org_name,
// machine_object_ou, …).
const MaxSysprepValueBytes = 256

// ProductKeyRE returns the pattern of a Windows product key (compiled on first use): five groups of five letters and
// digits separated by hyphens.
var ProductKeyRE = LazyRegexp(`^[A-Za-z0-9]{5}(-[A-Za-z0-9]{5}){4}$`)
