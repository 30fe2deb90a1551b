package sysprep

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	answer "github.com/vmpayload/vmpayload/payload/internal/sysprep"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds/cloudbase"
)

// Answer returns the answer file a job gives inline (sysprep or
// sysprep_base64) and the field it came from; "" when the job names a
// secret or gives none.
func Answer(j *job.Job) (text, field string, err error) {
	switch {
	case j.Sysprep != "":
		return j.Sysprep, "sysprep", nil
	case j.SysprepBase64 != "":
		b, err := base64.StdEncoding.DecodeString(j.SysprepBase64)
		if err != nil {
			return "", "sysprep_base64", fmt.Errorf("%s is not valid base64: %w", job.Quote(j.SysprepBase64), err)
		}
		return string(b), "sysprep_base64", nil
	}
	return "", "", nil
}

// CheckAnswer checks text, the answer file of job j given in field
// (sysprep, sysprep_base64, or sysprep_secret when fromSecret): well-formed
// XML whose root is unattend in the unattend namespace, only known
// placeholders, a value in the job for each it uses, and no job value
// that no placeholder carries (it would be dropped). Messages about inline
// text quote a short excerpt of the offending line; about a secret's
// content they quote nothing but the line number.
func CheckAnswer(j *job.Job, field, text string, fromSecret bool) []job.FieldError {
	var r job.Report
	text = strings.TrimPrefix(text, "\uFEFF") // the UTF-8 byte order mark Windows tools write
	where := ""
	if fromSecret {
		where = fmt.Sprintf(" (the content of secret %q)", j.SysprepSecret)
	}
	if strings.HasPrefix(text, "\xff\xfe") || strings.HasPrefix(text, "\xfe\xff") {
		r.Add(field, job.CodeInvalid, "the answer file%s is UTF-16; save it as UTF-8", where)
		return r.Errors
	}
	used, err := answer.Placeholders(text)
	if err != nil {
		r.Add(field, job.CodeInvalid, "the answer file%s: %v", where, err)
		return r.Errors
	}
	if err := answer.Check(text); err != nil {
		msg := err.Error()
		var se *answer.SyntaxError
		if errors.As(err, &se) && se.Line > 0 && !fromSecret {
			msg += ": " + job.Quote(lineOf(text, se.Line))
		}
		r.Add(field, job.CodeInvalid, "the answer file%s is not a Windows answer file: %s", where, msg)
		return r.Errors
	}
	if err := answer.CheckPlacements(text); err != nil {
		r.Add(field, job.CodeInvalid, "the answer file%s: %v", where, err)
		return r.Errors
	}
	uses := func(p string) bool { return slices.Contains(used, p) }
	for _, c := range placeholders {
		set := c.set(j)
		switch {
		case uses(c.placeholder) && !set:
			r.Add(c.field, job.CodeRequired, "the answer file%s uses %s, which is %s; the job gives none", where, answer.Spelling(c.placeholder), c.what)
		case !uses(c.placeholder) && set:
			f := c.field
			if c.placeholder == answer.Timezone && j.WindowsTimezone != "" {
				f = "windows_timezone"
			}
			r.Add(f, job.CodeConflict, "the answer file%s has no %s placeholder, so %s would be dropped; use it in the answer file or leave %s out", where, answer.Spelling(c.placeholder), f, f)
		}
	}
	return r.Errors
}

// placeholders ties each placeholder to the job field that fills
// it.
var placeholders = []struct {
	placeholder, field string
	set                func(*job.Job) bool
	what               string
}{
	{answer.Hostname, "hostname", func(j *job.Job) bool { return j.Hostname != "" }, "the job's hostname"},
	{answer.AdminPassword, "admin_password_secret", func(j *job.Job) bool { return j.AdminPasswordSecret != "" }, "the administrator password from admin_password_secret"},
	{answer.Timezone, "timezone", func(j *job.Job) bool { return j.Timezone != "" || j.WindowsTimezone != "" }, "the Windows time zone from timezone or windows_timezone"},
	{answer.JoinDomain, "join_domain", func(j *job.Job) bool { return j.JoinDomain != "" }, "the domain to join"},
	{answer.DomainAdmin, "domain_admin", func(j *job.Job) bool { return j.DomainAdmin != "" }, "the account that joins the domain"},
	{answer.DomainAdminPassword, "domain_admin_password_secret", func(j *job.Job) bool { return j.DomainAdminPasswordSecret != "" }, "the domain account's password from domain_admin_password_secret"},
	{answer.MachineObjectOU, "machine_object_ou", func(j *job.Job) bool { return j.MachineObjectOU != "" }, "the OU of the computer account"},
	{answer.ProductKey, "product_key_secret", func(j *job.Job) bool { return j.ProductKeySecret != "" }, "the product key from product_key_secret"},
	{answer.OrgName, "org_name", func(j *job.Job) bool { return j.OrgName != "" }, "the organisation name"},
	{answer.InputLocale, "input_locale", func(j *job.Job) bool { return j.InputLocale != "" }, "the keyboard layout"},
	{answer.UILanguage, "ui_language", func(j *job.Job) bool { return j.UILanguage != "" }, "the display language"},
	{answer.SystemLocale, "system_locale", func(j *job.Job) bool { return j.SystemLocale != "" }, "the system locale"},
	{answer.UserLocale, "user_locale", func(j *job.Job) bool { return j.UserLocale != "" }, "the user locale"},
}

// Values returns the value of each placeholder a job of format
// "sysprep" fills from its own fields; the secrets' values
// (admin_password, domain_admin_password, product_key) are the caller's,
// read from the secrets the job names.
func Values(j *job.Job) map[string]string {
	return map[string]string{
		answer.Hostname:        j.Hostname,
		answer.Timezone:        job.SysprepTimezone(j),
		answer.JoinDomain:      j.JoinDomain,
		answer.DomainAdmin:     j.DomainAdmin,
		answer.MachineObjectOU: j.MachineObjectOU,
		answer.OrgName:         j.OrgName,
		answer.InputLocale:     j.InputLocale,
		answer.UILanguage:      j.UILanguage,
		answer.SystemLocale:    j.SystemLocale,
		answer.UserLocale:      j.UserLocale,
	}
}

// languageTagRE is a Windows language tag as the answer file's locale
// settings take it ("en-US", "sr-Latn-RS", "zh-CN"): a language of two or
// three letters, then subtags of letters and digits.
var languageTagRE = job.LazyRegexp(`^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$`)

// keyboardLayoutRE is a keyboard layout as InputLocale takes it besides a
// language tag: a language id and a layout id in hex ("0409:00000409").
var keyboardLayoutRE = job.LazyRegexp(`^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{8}$`)

// checkValues checks the fields that fill the answer file's
// placeholders besides hostname, the time zone and the administrator
// password; each problem names its field and quotes the value (never a
// secret's: those are checked when read).
func checkValues(j *job.Job, r *job.Report) {
	plain := func(f, v string) bool {
		switch {
		case len(v) > job.MaxSysprepValueBytes:
			r.Add(f, job.CodeTooLarge, "%s is longer than %d bytes", job.Quote(v), job.MaxSysprepValueBytes)
		case strings.ContainsFunc(v, unicode.IsControl) || !utf8.ValidString(v) || strings.TrimSpace(v) != v:
			r.Add(f, job.CodeInvalid, "%s holds control characters, invalid UTF-8 or leading or trailing spaces, which an answer file's setting cannot carry", job.Quote(v))
		default:
			return true
		}
		return false
	}
	if v := j.JoinDomain; v != "" && plain("join_domain", v) && !job.ValidHostname(v) {
		r.Add("join_domain", job.CodeInvalid, "%s is not a domain name: a DNS name such as \"ad.example.com\" or a NetBIOS domain name such as \"EXAMPLE\" (letters, digits and hyphens)", job.Quote(v))
	}
	if v := j.DomainAdmin; v != "" && plain("domain_admin", v) {
		cloudbase.CheckUser("domain_admin", v, r)
	}
	if j.DomainAdminPasswordSecret != "" {
		job.CheckSecretName("domain_admin_password_secret", j.DomainAdminPasswordSecret, r)
	}
	if v := j.MachineObjectOU; v != "" && plain("machine_object_ou", v) && !distinguishedNameRE().MatchString(v) {
		r.Add("machine_object_ou", job.CodeInvalid, "%s is not the distinguished name of an OU, such as \"OU=Servers,DC=ad,DC=example,DC=com\"", job.Quote(v))
	}
	if j.ProductKeySecret != "" {
		job.CheckSecretName("product_key_secret", j.ProductKeySecret, r)
	}
	if v := j.OrgName; v != "" {
		plain("org_name", v)
	}
	if v := j.InputLocale; v != "" && plain("input_locale", v) {
		for _, l := range strings.Split(v, ";") {
			if !languageTagRE().MatchString(l) && !keyboardLayoutRE().MatchString(l) {
				r.Add("input_locale", job.CodeInvalid, "%s is not a list of input locales: each, separated by \";\", a language tag (\"de-DE\") or a language and keyboard layout id (\"0407:00000407\")", job.Quote(v))
				break
			}
		}
	}
	for _, f := range []struct{ name, v string }{{"ui_language", j.UILanguage}, {"system_locale", j.SystemLocale}, {"user_locale", j.UserLocale}} {
		if f.v != "" && plain(f.name, f.v) && !languageTagRE().MatchString(f.v) {
			r.Add(f.name, job.CodeInvalid, "%s is not a language tag such as \"en-US\" or \"de-DE\"", job.Quote(f.v))
		}
	}
}

// distinguishedNameRE is an LDAP distinguished name, loosely: attribute=value
// pairs separated by commas, the first an OU (escaped commas allowed).
var distinguishedNameRE = job.LazyRegexp(`^(?i:OU)=([^,\\]|\\.)+(,\s*[A-Za-z][A-Za-z0-9-]*=([^,\\]|\\.)+)*$`)

// lineOf returns line n (1-based) of text, trimmed.
func lineOf(text string, n int) string {
	lines := strings.Split(text, "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	return strings.TrimSpace(lines[n-1])
}
