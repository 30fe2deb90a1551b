// Package sysprep checks and fills Windows answer files (unattend XML, the
// file Windows Setup and sysprep's specialize and oobeSystem passes read)
// for jobs of format "sysprep": the file must be well-formed XML whose root
// element is `unattend` in the namespace urn:schemas-microsoft-com:unattend,
// and its named placeholders ({{hostname}}, {{admin_password}},
// {{timezone}}) are replaced by the job's values, escaped as XML text, so
// the filled file is well-formed too. It knows nothing of jobs: package job
// checks the job's fields with it and package cloudinit renders with it.
package sysprep

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Namespace is the XML namespace of an answer file's root element.
const Namespace = "urn:schemas-microsoft-com:unattend"

// Root is the local name of an answer file's root element.
const Root = "unattend"

// The placeholders an answer file may use, by their vmpayload names
// ({{hostname}}); OvirtNames gives each oVirt's spelling ($ComputerName$),
// which an answer file may use as well.
const (
	// Hostname is the job's hostname (Windows' ComputerName).
	Hostname = "hostname"
	// AdminPassword is the plaintext administrator password read from the
	// job's admin_password_secret.
	AdminPassword = "admin_password"
	// Timezone is the Windows time zone name (windows_timezone, or the
	// job's IANA timezone mapped through WindowsZone).
	Timezone = "timezone"
	// JoinDomain is the domain to join (join_domain).
	JoinDomain = "join_domain"
	// DomainAdmin is the account that joins it (domain_admin).
	DomainAdmin = "domain_admin"
	// DomainAdminPassword is that account's password, read from the job's
	// domain_admin_password_secret.
	DomainAdminPassword = "domain_admin_password"
	// MachineObjectOU is the OU the computer account goes to
	// (machine_object_ou).
	MachineObjectOU = "machine_object_ou"
	// ProductKey is the product key, read from product_key_secret.
	ProductKey = "product_key"
	// OrgName is the organisation (org_name).
	OrgName = "org_name"
	// InputLocale is the keyboard layout (input_locale).
	InputLocale = "input_locale"
	// UILanguage is the display language (ui_language); oVirt's
	// $SetupUiLanguageUiLanguage$ is filled with it too.
	UILanguage = "ui_language"
	// SystemLocale is the language for non-Unicode programs
	// (system_locale).
	SystemLocale = "system_locale"
	// UserLocale is the format of dates, numbers and currency
	// (user_locale).
	UserLocale = "user_locale"
)

// Names lists the placeholders, in the order the documentation gives them.
var Names = []string{Hostname, AdminPassword, Timezone, JoinDomain, DomainAdmin, DomainAdminPassword,
	MachineObjectOU, ProductKey, OrgName, InputLocale, UILanguage, SystemLocale, UserLocale}

// OvirtNames maps oVirt's placeholder names (ovirt-engine's sysprep
// templates, replaced there as plain text) to vmpayload's: an answer file
// written for oVirt is filled as it is. Only these exact spellings are
// placeholders; any other $...$ (Windows paths such as $OEM$) is text.
var OvirtNames = map[string]string{
	"ComputerName":              Hostname,
	"AdminPassword":             AdminPassword,
	"TimeZone":                  Timezone,
	"JoinDomain":                JoinDomain,
	"DomainAdmin":               DomainAdmin,
	"DomainAdminPassword":       DomainAdminPassword,
	"MachineObjectOU":           MachineObjectOU,
	"ProductKey":                ProductKey,
	"OrgName":                   OrgName,
	"InputLocale":               InputLocale,
	"UILanguage":                UILanguage,
	"SystemLocale":              SystemLocale,
	"UserLocale":                UserLocale,
	"SetupUiLanguageUiLanguage": UILanguage,
}

// Spelling returns how an answer file may write placeholder name:
// "{{name}}" and each of its oVirt names.
func Spelling(name string) string {
	s := "{{" + name + "}}"
	var ov []string
	for o, n := range OvirtNames {
		if n == name {
			ov = append(ov, "$"+o+"$")
		}
	}
	slices.Sort(ov)
	for _, o := range ov {
		s += " or " + o
	}
	return s
}

// placeholderRE matches a placeholder: "{{", a name, "}}" (spaces inside
// the braces are allowed: "{{ hostname }}"), or one of oVirt's names
// between dollars. Compiled on first use.
var placeholderRE = sync.OnceValue(func() *regexp.Regexp {
	var ov []string
	for o := range OvirtNames {
		ov = append(ov, regexp.QuoteMeta(o))
	}
	slices.Sort(ov)
	return regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}|\$(` + strings.Join(ov, "|") + `)\$`)
})

// nameOf returns the vmpayload name of the placeholder match m (the
// submatches of placeholderRE).
func nameOf(m []string) string {
	if m[2] != "" {
		return OvirtNames[m[2]]
	}
	return m[1]
}

// UnknownPlaceholderError is a placeholder that is not one of Names.
type UnknownPlaceholderError struct {
	Name string
}

func (e *UnknownPlaceholderError) Error() string {
	known := "{{" + strings.Join(Names, "}}, {{") + "}} (or oVirt's $ComputerName$, $AdminPassword$, …)"
	if len(e.Name) > 40 || strings.ContainsAny(e.Name, "\r\n") {
		// not a name someone meant: do not quote a stretch of the file
		return fmt.Sprintf("a {{...}} of %d characters is not a placeholder; the placeholders are %s", len(e.Name), known)
	}
	return fmt.Sprintf("unknown placeholder {{%s}}; the placeholders are %s", e.Name, known)
}

// Placeholders returns the distinct placeholders text uses (by their
// vmpayload names), in order of first use; an unknown one is an
// *UnknownPlaceholderError naming it. A well-formed document is read as
// Fill reads it (placeholders where Fill fills them); text that does not
// parse is searched as a whole, so that an unknown placeholder is named
// before the syntax error Check reports.
func Placeholders(text string) ([]string, error) {
	var names []string
	if occ, _, err := scan(text); err == nil {
		for _, o := range occ {
			names = append(names, o.name)
		}
	} else {
		for _, m := range placeholderRE().FindAllStringSubmatch(text, -1) {
			names = append(names, nameOf(m))
		}
	}
	var out []string
	for _, name := range names {
		if !slices.Contains(Names, name) {
			return nil, &UnknownPlaceholderError{Name: name}
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// SyntaxError says why a text is not an answer file. Line is the 1-based
// line the problem was found on (0 when it concerns the whole document);
// Msg says what is wrong without quoting the document's text beyond
// element names, so that it can be shown for an answer file read from a
// secret.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// ErrNotAnswerFile marks a well-formed document that is not an answer file
// (its root element is not unattend in Namespace).
var ErrNotAnswerFile = errors.New("not an unattend answer file")

// Check reports whether text is a well-formed XML document (UTF-8, one
// root element, every element closed, no undefined entity) whose root
// element is `unattend` in Namespace. A problem is a *SyntaxError.
func Check(text string) error {
	if !utf8.ValidString(text) {
		return &SyntaxError{Msg: "the answer file is not valid UTF-8"}
	}
	d := decoder(text)
	depth, roots := 0, 0
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return syntaxError(d, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
				line, _ := d.InputPos()
				if roots > 1 {
					return &SyntaxError{Line: line, Msg: "not well-formed XML: a second root element <" + qname(t.Name) + ">"}
				}
				if t.Name.Local != Root || namespaceOf(t) != Namespace {
					return &SyntaxError{Line: line, Msg: fmt.Sprintf("%v: the root element is <%s> in namespace %q; an answer file's root is <%s xmlns=%q>", ErrNotAnswerFile, qname(t.Name), namespaceOf(t), Root, Namespace)}
				}
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(t)) > 0 {
				line, _ := d.InputPos()
				return &SyntaxError{Line: line, Msg: "not well-formed XML: text outside the root element"}
			}
		}
	}
	if roots == 0 {
		return &SyntaxError{Msg: "not well-formed XML: the document has no root element"}
	}
	// RawToken does not check that end tags match their start tags; the
	// decoder's Token does: a second pass over a document already known to
	// be tokenisable.
	d2 := decoder(text)
	for {
		if _, err := d2.Token(); err == io.EOF {
			return nil
		} else if err != nil {
			return syntaxError(d2, err)
		}
	}
}

// decoder returns a strict decoder of text. Windows reads only UTF-8 (and
// UTF-16) answer files: a declaration of another charset is refused rather
// than converted (and byte offsets stay offsets into text).
func decoder(text string) *xml.Decoder {
	d := xml.NewDecoder(strings.NewReader(text))
	d.Strict = true
	d.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		if strings.EqualFold(label, "utf-8") || strings.EqualFold(label, "utf8") {
			return in, nil
		}
		return nil, fmt.Errorf("the XML declaration names encoding %q; write the answer file in UTF-8", label)
	}
	return d
}

// syntaxError is the *SyntaxError of err, an error of decoder d.
func syntaxError(d *xml.Decoder, err error) *SyntaxError {
	var se *xml.SyntaxError
	if errors.As(err, &se) {
		return &SyntaxError{Line: se.Line, Msg: "not well-formed XML: " + se.Msg}
	}
	line, _ := d.InputPos()
	return &SyntaxError{Line: line, Msg: "not well-formed XML: " + err.Error()}
}

// namespaceOf returns the namespace of the raw start element t: its
// prefix's xmlns:prefix attribute, or its default xmlns attribute. Only
// the root is asked, so no outer scope exists.
func namespaceOf(t xml.StartElement) string {
	want := "xmlns"
	for _, a := range t.Attr {
		switch {
		case t.Name.Space == "" && a.Name.Space == "" && a.Name.Local == "xmlns":
			return a.Value
		case t.Name.Space != "" && a.Name.Space == want && a.Name.Local == t.Name.Space:
			return a.Value
		}
	}
	return ""
}

func qname(n xml.Name) string {
	if n.Space != "" {
		return n.Space + ":" + n.Local
	}
	return n.Local
}
