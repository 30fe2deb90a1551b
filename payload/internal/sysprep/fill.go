package sysprep

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf16"
)

// Where a placeholder stands decides how its value is written, so that
// the reader of the file (an XML parser: Windows Setup's) reads the value
// itself.
type context int

const (
	// inText is element text: the value is escaped (&amp; &lt; …).
	inText context = iota
	// inCDATA is a CDATA section, where nothing is escaped: the value is
	// written raw, a "]]>" in it split across two sections.
	inCDATA
	// inAttr is an attribute value: escaped, quotes included.
	inAttr
	// inComment is a comment, which nothing reads: the value is written
	// raw (a value that would end the comment is refused).
	inComment
	// inMarkup is a processing instruction or a DOCTYPE: refused.
	inMarkup
)

// occurrence is one placeholder in the answer file.
type occurrence struct {
	start, end int    // byte offsets of the placeholder's text
	name       string // vmpayload name
	token      string // as written ("$AdminPassword$", "{{ hostname }}")
	where      context
	elem       int // the element whose text holds it; -1 outside text
}

// element is an element of the answer file, as far as Fill needs it to
// tell a <Value> under <PlainText>false</PlainText>.
type element struct {
	local  string
	parent int
	text   string // its own character data (text and CDATA), decoded
	kids   []int
}

// scan tokenises text with encoding/xml and returns the placeholders it
// holds, each with its context, and the elements. The decoder gives each
// token's byte range (InputOffset before and after it); it does not tell
// a CDATA section from text, so a character-data token whose raw bytes
// start with "<![CDATA[" is a CDATA section (the decoder returns each
// section as a token of its own, text outside it as another). A start
// tag's raw bytes hold placeholders only inside attribute values (a "{"
// or "$" cannot be part of a name), so a placeholder in one is an
// attribute's. A document that does not tokenise is a *SyntaxError.
func scan(text string) ([]occurrence, []element, error) {
	d := decoder(text)
	var occ []occurrence
	var elems []element
	var stack []int
	find := func(from, to int, where context, elem int) {
		for _, m := range placeholderRE().FindAllStringSubmatchIndex(text[from:to], -1) {
			sub := []string{text[from+m[0] : from+m[1]], "", ""}
			if m[2] >= 0 {
				sub[1] = text[from+m[2] : from+m[3]]
			}
			if m[4] >= 0 {
				sub[2] = text[from+m[4] : from+m[5]]
			}
			occ = append(occ, occurrence{start: from + m[0], end: from + m[1], name: nameOf(sub), token: sub[0], where: where, elem: elem})
		}
	}
	for {
		off := int(d.InputOffset())
		tok, err := d.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, syntaxError(d, err)
		}
		end := int(d.InputOffset())
		cur := -1
		if len(stack) > 0 {
			cur = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case xml.StartElement:
			find(off, end, inAttr, -1)
			elems = append(elems, element{local: t.Name.Local, parent: cur})
			n := len(elems) - 1
			if cur >= 0 {
				elems[cur].kids = append(elems[cur].kids, n)
			}
			stack = append(stack, n) // RawToken returns an EndElement for <a/> too
		case xml.EndElement:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			where := inText
			if strings.HasPrefix(text[off:end], "<![CDATA[") {
				where = inCDATA
			}
			find(off, end, where, cur)
			if cur >= 0 {
				elems[cur].text += string(t)
			}
		case xml.Comment:
			find(off, end, inComment, -1)
		default: // xml.ProcInst, xml.Directive
			find(off, end, inMarkup, -1)
		}
	}
	return occ, elems, nil
}

// MissingValueError is a placeholder the answer file uses whose value the
// job does not give.
type MissingValueError struct {
	Name string
}

func (e *MissingValueError) Error() string {
	return fmt.Sprintf("the answer file uses %s but it has no value", Spelling(e.Name))
}

// PlacementError is a placeholder where no value can be written as its
// reader would read it. It never holds the value.
type PlacementError struct {
	Token string // the placeholder as written
	Msg   string
}

func (e *PlacementError) Error() string { return e.Token + ": " + e.Msg }

// Fill replaces every placeholder in text with its value from values,
// written as the reader of the file reads it: escaped as XML character
// data (& < > " ' and line ends) in element text and attribute values,
// raw inside a CDATA section (a "]]>" in the value split across two
// sections: "]]]]><![CDATA[>"), and, in the <Value> of an element with
// <PlainText>false</PlainText> (Windows System Image Manager's hidden
// passwords), as base64 of the UTF-16LE bytes of the value followed by
// the element's name (AdministratorPassword, Password). Everything else
// is kept byte for byte, line ends included. The placeholder's context
// comes from tokenising the template (scan). An unknown placeholder is an
// *UnknownPlaceholderError, one without a value (absent or "") a
// *MissingValueError, one where no value can stand a *PlacementError.
// The result is checked with Check.
func Fill(text string, values map[string]string) (string, error) {
	if err := Check(text); err != nil {
		if _, perr := Placeholders(text); perr != nil {
			return "", perr
		}
		return "", err
	}
	occ, elems, err := scan(text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	last := 0
	for _, o := range occ {
		v, ok := values[o.name]
		if !slices.Contains(Names, o.name) {
			return "", &UnknownPlaceholderError{Name: o.name}
		}
		if !ok || v == "" {
			return "", &MissingValueError{Name: o.name}
		}
		if pe := placement(o, elems); pe != nil {
			return "", pe
		}
		if owner, hidden := hiddenValue(elems, o.elem); hidden {
			v = HiddenPassword(v, elems[owner].local)
		}
		switch o.where {
		case inText, inAttr:
			v = escape(v)
		case inCDATA:
			v = strings.ReplaceAll(v, "]]>", "]]]]><![CDATA[>")
		case inComment:
			if strings.Contains(v, "--") || strings.HasSuffix(v, "-") {
				return "", &PlacementError{Token: o.token, Msg: "its value cannot stand in an XML comment (it holds \"--\" or ends with \"-\"); remove the placeholder from the comment"}
			}
		}
		b.WriteString(text[last:o.start])
		b.WriteString(v)
		last = o.end
	}
	b.WriteString(text[last:])
	out := b.String()
	if err := Check(out); err != nil {
		return "", err
	}
	return out, nil
}

// CheckPlacements reports a placeholder of the well-formed answer file
// text that no value could fill as its reader reads it, whatever the
// value: one in a processing instruction or DOCTYPE, or one in a hidden
// <Value> (PlainText false) with other text. A *PlacementError; nil when
// text does not parse (Check reports that).
func CheckPlacements(text string) error {
	occ, elems, err := scan(text)
	if err != nil {
		return nil
	}
	for _, o := range occ {
		if pe := placement(o, elems); pe != nil {
			return pe
		}
	}
	return nil
}

// placement is CheckPlacements for one placeholder.
func placement(o occurrence, elems []element) *PlacementError {
	if o.where == inMarkup {
		return &PlacementError{Token: o.token, Msg: "a placeholder in a processing instruction or DOCTYPE is not filled; move it into element text or an attribute"}
	}
	if _, hidden := hiddenValue(elems, o.elem); hidden && strings.TrimSpace(elems[o.elem].text) != o.token {
		return &PlacementError{Token: o.token, Msg: "a <Value> whose <PlainText> is false holds base64 text; the placeholder must be its whole content"}
	}
	return nil
}

// hiddenValue reports whether element e is a <Value> whose parent has a
// <PlainText> child saying false, and returns the parent.
func hiddenValue(elems []element, e int) (int, bool) {
	if e < 0 || elems[e].local != "Value" || elems[e].parent < 0 {
		return -1, false
	}
	p := elems[e].parent
	for _, k := range elems[p].kids {
		if elems[k].local == "PlainText" && strings.EqualFold(strings.TrimSpace(elems[k].text), "false") {
			return p, true
		}
	}
	return -1, false
}

// HiddenPassword returns password as Windows System Image Manager writes
// it under <PlainText>false</PlainText>: base64 of the UTF-16LE bytes of
// the password followed by the name of the element holding the <Value>
// ("AdministratorPassword", "Password"). Windows decodes it and drops that
// suffix.
func HiddenPassword(password, element string) string {
	u := utf16.Encode([]rune(password + element))
	buf := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(buf[2*i:], c)
	}
	return base64.StdEncoding.EncodeToString(buf)
}

// escape returns s as XML character data.
func escape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
