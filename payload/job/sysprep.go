package job

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

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

// media is the image media of the medium.
func (m SysprepMedium) media() Media {
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

// sysprepRefusals lists the job fields format "sysprep" cannot carry: the
// answer file is the whole payload, so each is refused by its path,
// saying why (never dropped).
var sysprepRefusals = []struct {
	field string
	set   func(*Job) bool
}{
	{"instance_id", func(j *Job) bool { return j.InstanceID != "" }},
	{"users", func(j *Job) bool { return len(j.Users) > 0 }},
	{"ssh_authorized_keys", func(j *Job) bool { return len(j.SSHAuthorizedKeys) > 0 }},
	{"regenerate_ssh_host_keys", func(j *Job) bool { return j.RegenerateSSHHostKeys != nil }},
	{"ssh_password_auth", func(j *Job) bool { return j.SSHPasswordAuth != nil }},
	{"dns", func(j *Job) bool { return j.DNS != nil }},
	{"nics", func(j *Job) bool { return len(j.NICs) > 0 }},
	{"files", func(j *Job) bool { return len(j.Files) > 0 }},
	{"runcmd", func(j *Job) bool { return len(j.Runcmd) > 0 }},
	{"locale", func(j *Job) bool { return j.Locale != "" }},
	{"ssh_host_keys", func(j *Job) bool { return len(j.SSHHostKeys) > 0 }},
	{"power_state", func(j *Job) bool { return j.PowerState != nil }},
	{"phone_home", func(j *Job) bool { return j.PhoneHome != nil }},
	{"random_seed", func(j *Job) bool { return j.RandomSeed != nil }},
	{"user_data", func(j *Job) bool { return j.UserData != "" }},
	{"user_data_base64", func(j *Job) bool { return j.UserDataBase64 != "" }},
	{"user_data_secret", func(j *Job) bool { return j.UserDataSecret != "" }},
	{"user_data_mode", func(j *Job) bool { return j.UserDataMode == ModeReplace }},
	{"vendor_data", func(j *Job) bool { return j.VendorData != "" }},
	{"vendor_data_base64", func(j *Job) bool { return j.VendorDataBase64 != "" }},
	{"meta_data", func(j *Job) bool { return j.MetaData != nil }},
	{"network_config", func(j *Job) bool { return j.NetworkConfig != "" }},
	{"network_data", func(j *Job) bool { return j.NetworkData != nil }},
	{"guest_report", func(j *Job) bool { return j.GuestReport != nil && *j.GuestReport }},
	{"prebuilt_image", func(j *Job) bool { return j.PrebuiltImage != "" }},
	// ignition, ignition_base64, butane and ignition_delivery: refused
	// by validateIgnition for every format but "ignition"
	// admin_username and admin_certs are cloudbase-init's (validateWindows
	// leaves a sysprep job to this function); the answer file names the
	// administrator itself
	{"admin_username", func(j *Job) bool { return j.AdminUsername != "" }},
	{"admin_certs", func(j *Job) bool { return len(j.AdminCerts) > 0 }},
}

// validateSysprep checks the sysprep fields and, for a job of format
// "sysprep", refuses every field the answer file cannot carry.
func validateSysprep(j *Job, r *Report) {
	if j.Format != FormatSysprep {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"sysprep", j.Sysprep != ""}, {"sysprep_base64", j.SysprepBase64 != ""}, {"sysprep_secret", j.SysprepSecret != ""},
			{"sysprep_file_name", j.SysprepFileName != ""}, {"sysprep_medium", j.SysprepMedium != ""},
			{"windows_timezone", j.WindowsTimezone != ""},
			// admin_password_secret is also cloudbase-init's admin_pass:
			// validateWindows checks it for the other formats
		} {
			if f.set {
				r.Add(f.name, CodeConflict, "%s is only used with format \"sysprep\"", f.name)
			}
		}
		return
	}
	// guest_os: validateWindows checked the value and leaves the rest of a
	// sysprep job to this function; "" and "windows" both mean Windows
	// here, "linux" contradicts the format
	if j.GuestOS == GuestLinux {
		r.Add("guest_os", CodeConflict, "format \"sysprep\" is a Windows answer file: guest_os must be \"windows\" or left out, not %s", quote(string(j.GuestOS)))
	}
	for _, f := range sysprepRefusals {
		if f.set(j) {
			r.Add(f.field, CodeConflict, "format \"sysprep\" cannot carry %s: the payload is the Windows answer file alone; configure this in the answer file", f.field)
		}
	}
	switch j.SysprepMedium {
	case "", MediumFloppy, MediumCDROM:
		if j.SysprepMedium != "" && j.Media != "" && j.Media != j.SysprepMedium.media() {
			r.Add("media", CodeConflict, "sysprep_medium %s takes media %s, not %s (or leave media out)", quote(string(j.SysprepMedium)), quote(string(j.SysprepMedium.media())), quote(string(j.Media)))
		}
	default:
		r.Add("sysprep_medium", CodeInvalid, "%s is not a sysprep medium; use \"floppy\" or \"cdrom\"", quote(string(j.SysprepMedium)))
	}
	switch j.SysprepFileName {
	case "", UnattendXML, AutounattendXML:
	default:
		r.Add("sysprep_file_name", CodeInvalid, "%s is not an answer file name Windows looks for; use %q (sysprep's specialize and oobeSystem passes) or %q (Windows Setup)", quote(j.SysprepFileName), UnattendXML, AutounattendXML)
	}
	if j.Hostname != "" && ValidHostname(j.Hostname) && !ValidComputerName(j.Hostname) {
		r.Add("hostname", CodeInvalid, "%s is not a Windows computer name: one label of at most 15 letters, digits and hyphens (the NetBIOS limit), not only digits", quote(j.Hostname))
	}
	if j.AdminPasswordSecret != "" {
		validateSecretName("admin_password_secret", j.AdminPasswordSecret, r)
	}
	if j.WindowsTimezone != "" {
		if j.Timezone != "" {
			r.Add("windows_timezone", CodeConflict, "use only one of timezone (an IANA name, mapped to Windows') and windows_timezone")
		} else if !sysprep.IsWindowsZone(j.WindowsTimezone) {
			r.Add("windows_timezone", CodeNotFound, "%s is not a Windows time zone name such as \"W. Europe Standard Time\" or \"UTC\" (the names of the Unicode CLDR's windowsZones table)", quote(j.WindowsTimezone))
		}
	} else if j.Timezone != "" {
		if _, ok := sysprep.WindowsZone(j.Timezone); !ok {
			r.Add("timezone", CodeNotFound, "time zone %s has no Windows time zone in the Unicode CLDR's mapping; give the Windows name as windows_timezone instead", quote(j.Timezone))
		}
	}
	var set []string
	for _, f := range []struct {
		name string
		on   bool
	}{{"sysprep", j.Sysprep != ""}, {"sysprep_base64", j.SysprepBase64 != ""}, {"sysprep_secret", j.SysprepSecret != ""}} {
		if f.on {
			set = append(set, f.name)
		}
	}
	switch len(set) {
	case 0:
		r.Add("sysprep", CodeRequired, "format \"sysprep\" needs the answer file: give sysprep (its XML text), sysprep_base64 or sysprep_secret")
		return
	case 1:
	default:
		r.Add(set[0], CodeConflict, "use only one of sysprep, sysprep_base64 and sysprep_secret (got %s)", strings.Join(set, ", "))
		return
	}
	if j.SysprepSecret != "" {
		validateSecretName("sysprep_secret", j.SysprepSecret, r)
		return // its content is checked when the secret is read (CheckSysprepAnswer)
	}
	text, field, err := SysprepAnswer(j)
	if err != nil {
		r.Add(field, CodeInvalid, "%v", err)
		return
	}
	r.Errors = append(r.Errors, CheckSysprepAnswer(j, field, text, false)...)
}

// ValidComputerName reports whether s can be a Windows computer name: one
// DNS label of 1-15 letters, digits and hyphens (NetBIOS names are at most
// 15 characters), not only digits.
func ValidComputerName(s string) bool {
	if len(s) == 0 || len(s) > 15 || strings.Trim(s, "0123456789") == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// SysprepAnswer returns the answer file a job gives inline (sysprep or
// sysprep_base64) and the field it came from; "" when the job names a
// secret or gives none.
func SysprepAnswer(j *Job) (text, field string, err error) {
	switch {
	case j.Sysprep != "":
		return j.Sysprep, "sysprep", nil
	case j.SysprepBase64 != "":
		b, err := base64.StdEncoding.DecodeString(j.SysprepBase64)
		if err != nil {
			return "", "sysprep_base64", fmt.Errorf("%s is not valid base64: %w", quote(j.SysprepBase64), err)
		}
		return string(b), "sysprep_base64", nil
	}
	return "", "", nil
}

// SysprepTimezone returns the Windows time zone name of a job of format
// "sysprep": windows_timezone, or the job's IANA timezone mapped through
// the CLDR table; "" when the job has neither (or an unmapped one, which
// Validate reports).
func SysprepTimezone(j *Job) string {
	if j.WindowsTimezone != "" {
		w, _ := sysprep.WindowsZone(j.WindowsTimezone)
		return w
	}
	if j.Timezone != "" {
		w, _ := sysprep.WindowsZone(j.Timezone)
		return w
	}
	return ""
}

// CheckSysprepAnswer checks text, the answer file of job j given in field
// (sysprep, sysprep_base64, or sysprep_secret when fromSecret): well-formed
// XML whose root is unattend in the unattend namespace, only known
// placeholders, a value in the job for each it uses, and no job value
// that no placeholder carries (it would be dropped). Messages about inline
// text quote a short excerpt of the offending line; about a secret's
// content they quote nothing but the line number.
func CheckSysprepAnswer(j *Job, field, text string, fromSecret bool) []FieldError {
	var r Report
	text = strings.TrimPrefix(text, "\uFEFF") // the UTF-8 byte order mark Windows tools write
	where := ""
	if fromSecret {
		where = fmt.Sprintf(" (the content of secret %q)", j.SysprepSecret)
	}
	if strings.HasPrefix(text, "\xff\xfe") || strings.HasPrefix(text, "\xfe\xff") {
		r.Add(field, CodeInvalid, "the answer file%s is UTF-16; save it as UTF-8", where)
		return r.Errors
	}
	used, err := sysprep.Placeholders(text)
	if err != nil {
		r.Add(field, CodeInvalid, "the answer file%s: %v", where, err)
		return r.Errors
	}
	if err := sysprep.Check(text); err != nil {
		msg := err.Error()
		var se *sysprep.SyntaxError
		if errors.As(err, &se) && se.Line > 0 && !fromSecret {
			msg += ": " + quote(lineOf(text, se.Line))
		}
		r.Add(field, CodeInvalid, "the answer file%s is not a Windows answer file: %s", where, msg)
		return r.Errors
	}
	uses := func(p string) bool { return slices.Contains(used, p) }
	for _, c := range []struct {
		placeholder, field string
		set                bool
		what               string
	}{
		{sysprep.Hostname, "hostname", j.Hostname != "", "the job's hostname"},
		{sysprep.AdminPassword, "admin_password_secret", j.AdminPasswordSecret != "", "the administrator password from admin_password_secret"},
		{sysprep.Timezone, "timezone", j.Timezone != "" || j.WindowsTimezone != "", "the Windows time zone from timezone or windows_timezone"},
	} {
		switch {
		case uses(c.placeholder) && !c.set:
			f := c.field
			r.Add(f, CodeRequired, "the answer file%s uses {{%s}}, which is %s; the job gives none", where, c.placeholder, c.what)
		case !uses(c.placeholder) && c.set:
			f := c.field
			if c.placeholder == sysprep.Timezone && j.WindowsTimezone != "" {
				f = "windows_timezone"
			}
			r.Add(f, CodeConflict, "the answer file%s has no {{%s}} placeholder, so %s would be dropped; use {{%s}} in the answer file or leave %s out", where, c.placeholder, f, c.placeholder, f)
		}
	}
	return r.Errors
}

// lineOf returns line n (1-based) of text, trimmed.
func lineOf(text string, n int) string {
	lines := strings.Split(text, "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	return strings.TrimSpace(lines[n-1])
}
