package job

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

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

// ValidComputerName reports whether s can be a Windows computer name: one
// DNS label of letters, digits and hyphens that the computer-name rule
// takes (ComputerName: at most NetBIOSNameMax characters, not only
// digits).
func ValidComputerName(s string) bool {
	if long, digits := ComputerName(s); long || digits || s[0] == '-' || s[len(s)-1] == '-' {
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
	if err := sysprep.CheckPlacements(text); err != nil {
		r.Add(field, CodeInvalid, "the answer file%s: %v", where, err)
		return r.Errors
	}
	uses := func(p string) bool { return slices.Contains(used, p) }
	for _, c := range sysprepPlaceholders {
		set := c.set(j)
		switch {
		case uses(c.placeholder) && !set:
			r.Add(c.field, CodeRequired, "the answer file%s uses %s, which is %s; the job gives none", where, sysprep.Spelling(c.placeholder), c.what)
		case !uses(c.placeholder) && set:
			f := c.field
			if c.placeholder == sysprep.Timezone && j.WindowsTimezone != "" {
				f = "windows_timezone"
			}
			r.Add(f, CodeConflict, "the answer file%s has no %s placeholder, so %s would be dropped; use it in the answer file or leave %s out", where, sysprep.Spelling(c.placeholder), f, f)
		}
	}
	return r.Errors
}

// sysprepPlaceholders ties each placeholder to the job field that fills
// it.
var sysprepPlaceholders = []struct {
	placeholder, field string
	set                func(*Job) bool
	what               string
}{
	{sysprep.Hostname, "hostname", func(j *Job) bool { return j.Hostname != "" }, "the job's hostname"},
	{sysprep.AdminPassword, "admin_password_secret", func(j *Job) bool { return j.AdminPasswordSecret != "" }, "the administrator password from admin_password_secret"},
	{sysprep.Timezone, "timezone", func(j *Job) bool { return j.Timezone != "" || j.WindowsTimezone != "" }, "the Windows time zone from timezone or windows_timezone"},
	{sysprep.JoinDomain, "join_domain", func(j *Job) bool { return j.JoinDomain != "" }, "the domain to join"},
	{sysprep.DomainAdmin, "domain_admin", func(j *Job) bool { return j.DomainAdmin != "" }, "the account that joins the domain"},
	{sysprep.DomainAdminPassword, "domain_admin_password_secret", func(j *Job) bool { return j.DomainAdminPasswordSecret != "" }, "the domain account's password from domain_admin_password_secret"},
	{sysprep.MachineObjectOU, "machine_object_ou", func(j *Job) bool { return j.MachineObjectOU != "" }, "the OU of the computer account"},
	{sysprep.ProductKey, "product_key_secret", func(j *Job) bool { return j.ProductKeySecret != "" }, "the product key from product_key_secret"},
	{sysprep.OrgName, "org_name", func(j *Job) bool { return j.OrgName != "" }, "the organisation name"},
	{sysprep.InputLocale, "input_locale", func(j *Job) bool { return j.InputLocale != "" }, "the keyboard layout"},
	{sysprep.UILanguage, "ui_language", func(j *Job) bool { return j.UILanguage != "" }, "the display language"},
	{sysprep.SystemLocale, "system_locale", func(j *Job) bool { return j.SystemLocale != "" }, "the system locale"},
	{sysprep.UserLocale, "user_locale", func(j *Job) bool { return j.UserLocale != "" }, "the user locale"},
}

// SysprepValues returns the value of each placeholder a job of format
// "sysprep" fills from its own fields; the secrets' values
// (admin_password, domain_admin_password, product_key) are the caller's,
// read from the secrets the job names.
func SysprepValues(j *Job) map[string]string {
	return map[string]string{
		sysprep.Hostname:        j.Hostname,
		sysprep.Timezone:        SysprepTimezone(j),
		sysprep.JoinDomain:      j.JoinDomain,
		sysprep.DomainAdmin:     j.DomainAdmin,
		sysprep.MachineObjectOU: j.MachineObjectOU,
		sysprep.OrgName:         j.OrgName,
		sysprep.InputLocale:     j.InputLocale,
		sysprep.UILanguage:      j.UILanguage,
		sysprep.SystemLocale:    j.SystemLocale,
		sysprep.UserLocale:      j.UserLocale,
	}
}

// languageTagRE is a Windows language tag as the answer file's locale
// settings take it ("en-US", "sr-Latn-RS", "zh-CN"): a language of two or
// three letters, then subtags of letters and digits.
var languageTagRE = lazyRegexp(`^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$`)

// keyboardLayoutRE is a keyboard layout as InputLocale takes it besides a
// language tag: a language id and a layout id in hex ("0409:00000409").
var keyboardLayoutRE = lazyRegexp(`^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{8}$`)

// MaxSysprepValueBytes bounds the plain sysprep value fields (org_name,
// machine_object_ou, …).
const MaxSysprepValueBytes = 256

// CheckSysprepValues checks the fields that fill the answer file's
// placeholders besides hostname, the time zone and the administrator
// password; each problem names its field and quotes the value (never a
// secret's: those are checked when read).
func CheckSysprepValues(j *Job, r *Report) {
	plain := func(f, v string) bool {
		switch {
		case len(v) > MaxSysprepValueBytes:
			r.Add(f, CodeTooLarge, "%s is longer than %d bytes", quote(v), MaxSysprepValueBytes)
		case hasControl(v) || !utf8.ValidString(v) || strings.TrimSpace(v) != v:
			r.Add(f, CodeInvalid, "%s holds control characters, invalid UTF-8 or leading or trailing spaces, which an answer file's setting cannot carry", quote(v))
		default:
			return true
		}
		return false
	}
	if v := j.JoinDomain; v != "" && plain("join_domain", v) && !ValidHostname(v) {
		r.Add("join_domain", CodeInvalid, "%s is not a domain name: a DNS name such as \"ad.example.com\" or a NetBIOS domain name such as \"EXAMPLE\" (letters, digits and hyphens)", quote(v))
	}
	if v := j.DomainAdmin; v != "" && plain("domain_admin", v) {
		CheckWindowsUser("domain_admin", v, r)
	}
	if j.DomainAdminPasswordSecret != "" {
		validateSecretName("domain_admin_password_secret", j.DomainAdminPasswordSecret, r)
	}
	if v := j.MachineObjectOU; v != "" && plain("machine_object_ou", v) && !distinguishedNameRE().MatchString(v) {
		r.Add("machine_object_ou", CodeInvalid, "%s is not the distinguished name of an OU, such as \"OU=Servers,DC=ad,DC=example,DC=com\"", quote(v))
	}
	if j.ProductKeySecret != "" {
		validateSecretName("product_key_secret", j.ProductKeySecret, r)
	}
	if v := j.OrgName; v != "" {
		plain("org_name", v)
	}
	if v := j.InputLocale; v != "" && plain("input_locale", v) {
		for _, l := range strings.Split(v, ";") {
			if !languageTagRE().MatchString(l) && !keyboardLayoutRE().MatchString(l) {
				r.Add("input_locale", CodeInvalid, "%s is not a list of input locales: each, separated by \";\", a language tag (\"de-DE\") or a language and keyboard layout id (\"0407:00000407\")", quote(v))
				break
			}
		}
	}
	for _, f := range []struct{ name, v string }{{"ui_language", j.UILanguage}, {"system_locale", j.SystemLocale}, {"user_locale", j.UserLocale}} {
		if f.v != "" && plain(f.name, f.v) && !languageTagRE().MatchString(f.v) {
			r.Add(f.name, CodeInvalid, "%s is not a language tag such as \"en-US\" or \"de-DE\"", quote(f.v))
		}
	}
}

// distinguishedNameRE is an LDAP distinguished name, loosely: attribute=value
// pairs separated by commas, the first an OU (escaped commas allowed).
var distinguishedNameRE = lazyRegexp(`^(?i:OU)=([^,\\]|\\.)+(,\s*[A-Za-z][A-Za-z0-9-]*=([^,\\]|\\.)+)*$`)

// ProductKeyRE returns the pattern of a Windows product key (compiled on first use): five groups of five letters and
// digits separated by hyphens.
var ProductKeyRE = lazyRegexp(`^[A-Za-z0-9]{5}(-[A-Za-z0-9]{5}){4}$`)

// lineOf returns line n (1-based) of text, trimmed.
func lineOf(text string, n int) string {
	lines := strings.Split(text, "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	return strings.TrimSpace(lines[n-1])
}
