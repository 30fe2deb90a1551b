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
	"unicode/utf8"
)

// Namespace is the XML namespace of an answer file's root element.
const Namespace = "urn:schemas-microsoft-com:unattend"

// Root is the local name of an answer file's root element.
const Root = "unattend"

// The placeholders an answer file may use.
const (
	// Hostname is the job's hostname (Windows' ComputerName).
	Hostname = "hostname"
	// AdminPassword is the plaintext administrator password read from the
	// job's admin_password_secret.
	AdminPassword = "admin_password"
	// Timezone is the Windows time zone name (windows_timezone, or the
	// job's IANA timezone mapped through WindowsZone).
	Timezone = "timezone"
)

// Names lists the placeholders, in the order the documentation gives them.
var Names = []string{Hostname, AdminPassword, Timezone}

// placeholderRE matches a placeholder: "{{", a name, "}}". Spaces inside
// the braces are allowed ("{{ hostname }}").
var placeholderRE = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// UnknownPlaceholderError is a placeholder that is not one of Names.
type UnknownPlaceholderError struct {
	Name string
}

func (e *UnknownPlaceholderError) Error() string {
	known := "{{" + strings.Join(Names, "}}, {{") + "}}"
	if len(e.Name) > 40 || strings.ContainsAny(e.Name, "\r\n") {
		// not a name someone meant: do not quote a stretch of the file
		return fmt.Sprintf("a {{...}} of %d characters is not a placeholder; the placeholders are %s", len(e.Name), known)
	}
	return fmt.Sprintf("unknown placeholder {{%s}}; the placeholders are %s", e.Name, known)
}

// Placeholders returns the distinct placeholders text uses, in order of
// first use; an unknown one is an *UnknownPlaceholderError naming it.
func Placeholders(text string) ([]string, error) {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(text, -1) {
		name := m[1]
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
	d := xml.NewDecoder(strings.NewReader(text))
	d.Strict = true
	// Windows reads only UTF-8 (and UTF-16) answer files; a declaration of
	// another charset is refused rather than converted.
	d.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		if strings.EqualFold(label, "utf-8") || strings.EqualFold(label, "utf8") {
			return in, nil
		}
		return nil, fmt.Errorf("the XML declaration names encoding %q; write the answer file in UTF-8", label)
	}
	depth, roots := 0, 0
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				return &SyntaxError{Line: se.Line, Msg: "not well-formed XML: " + se.Msg}
			}
			line, _ := d.InputPos()
			return &SyntaxError{Line: line, Msg: "not well-formed XML: " + err.Error()}
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
	d2 := xml.NewDecoder(strings.NewReader(text))
	d2.Strict = true
	d2.CharsetReader = d.CharsetReader
	for {
		if _, err := d2.Token(); err == io.EOF {
			return nil
		} else if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				return &SyntaxError{Line: se.Line, Msg: "not well-formed XML: " + se.Msg}
			}
			line, _ := d2.InputPos()
			return &SyntaxError{Line: line, Msg: "not well-formed XML: " + err.Error()}
		}
	}
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

// MissingValueError is a placeholder the answer file uses whose value the
// job does not give.
type MissingValueError struct {
	Name string
}

func (e *MissingValueError) Error() string {
	return fmt.Sprintf("the answer file uses {{%s}} but it has no value", e.Name)
}

// Fill replaces every placeholder in text with its value from values,
// escaped as XML character data (& < > " ' and characters XML cannot
// carry), so a value can sit in element text or in an attribute value.
// An unknown placeholder is an *UnknownPlaceholderError, one without a
// value (absent or "") a *MissingValueError. The result is checked with
// Check.
func Fill(text string, values map[string]string) (string, error) {
	if _, err := Placeholders(text); err != nil {
		return "", err
	}
	var ferr error
	out := placeholderRE.ReplaceAllStringFunc(text, func(m string) string {
		name := placeholderRE.FindStringSubmatch(m)[1]
		v := values[name]
		if v == "" && ferr == nil {
			ferr = &MissingValueError{Name: name}
		}
		return escape(v)
	})
	if ferr != nil {
		return "", ferr
	}
	if err := Check(out); err != nil {
		return "", err
	}
	return out, nil
}

// escape returns s as XML character data.
func escape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
