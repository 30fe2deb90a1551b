package domxml

import (
	"strings"
	"unicode/utf8"

	"github.com/beevik/etree"
)

// fastTree builds, without encoding/xml, the tree etree's strict reader
// builds from s, for the plain XML libvirt writes: elements with ASCII
// names (one optional prefix), quoted attribute values, text, comments and
// the five predefined entities. ok is false as soon as s holds anything
// else: a declaration or processing instruction, a DOCTYPE, CDATA, a
// character reference, a carriage return, a control character, invalid
// UTF-8, "]]>" in text, an attribute given twice, spaces around "=",
// non-whitespace outside the root element, a tag left open or closed by
// another name, or a tree deeper than etree's limit. The caller then reads
// s with etree (parse), which accepts or refuses it with the error that
// names the fault.
//
// Every document it builds is one encoding/xml's strict tokenizer accepts,
// and the tree is the one etree builds from it, node for node
// (TestFastTreeAgreesWithEtree, FuzzCheckDomain). It exists because the
// agent reads every domain definition it edits and every live XML it
// follows, and encoding/xml's byte-at-a-time reader was most of that work
// (issue 14). Its strings are slices of s unless an entity was decoded.
func fastTree(s string) (doc *etree.Document, ok bool) {
	doc = etree.NewDocument()
	p := fastParser{s: s}
	cur := &doc.Element
	depth := 0
	for p.i < len(s) {
		if s[p.i] != '<' {
			text, ok := p.text()
			if !ok || (depth == 0 && !isSpaceText(text)) {
				return nil, false
			}
			cur.CreateText(text).SetData(text) // SetData sets the whitespace flag as the reader does
			continue
		}
		switch {
		case strings.HasPrefix(s[p.i:], "</"):
			p.i += 2
			name, ok := p.name()
			if !ok || depth == 0 || name != rawTag(cur) {
				return nil, false
			}
			p.space()
			if !p.eat('>') {
				return nil, false
			}
			cur = cur.Parent()
			depth--
		case strings.HasPrefix(s[p.i:], "<!--"):
			body, ok := p.comment()
			if !ok {
				return nil, false
			}
			cur.CreateComment(body)
		case strings.HasPrefix(s[p.i:], "<!"), strings.HasPrefix(s[p.i:], "<?"):
			return nil, false
		default:
			p.i++
			name, ok := p.name()
			if !ok || depth >= fastMaxDepth {
				return nil, false
			}
			el := cur.CreateElement(name)
			closed, ok := p.attrs(el)
			if !ok {
				return nil, false
			}
			if !closed {
				cur = el
				depth++
			}
		}
	}
	if depth != 0 {
		return nil, false
	}
	return doc, true
}

// readFragment reads an element made for a definition (a marshalled
// <disk>, a recipe element) with fastTree, or with etree's reader (default
// settings) when fastTree gives up: for encoding/xml's marshalling, a
// character reference it writes for a quote or a control character.
func readFragment(s string) (*etree.Document, error) {
	if doc, ok := fastTree(s); ok {
		return doc, nil
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromString(s); err != nil {
		return nil, err
	}
	return doc, nil
}

// fastMaxDepth keeps fastTree below etree's default depth limit (1024
// open elements), where its reader fails.
const fastMaxDepth = 1000

// fastParser is fastTree's position in its input.
type fastParser struct {
	s string
	i int
}

// eat consumes c when it is next.
func (p *fastParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// space consumes spaces, tabs and newlines and reports whether there were
// any.
func (p *fastParser) space() bool {
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
	return p.i > start
}

// name reads an ASCII XML name with at most one colon, neither first nor
// last: the names encoding/xml splits into prefix and local part at that
// colon, as etree does.
func (p *fastParser) name() (string, bool) {
	start, colons := p.i, 0
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case c >= '0' && c <= '9', c == '.', c == '-':
			if p.i == start {
				return "", false
			}
		case c == ':':
			if p.i == start {
				return "", false
			}
			colons++
		default:
			goto done
		}
		p.i++
	}
done:
	n := p.s[start:p.i]
	if n == "" || colons > 1 || n[len(n)-1] == ':' {
		return "", false
	}
	return n, true
}

// attrs reads the attributes of a start tag into el, up to and including
// its closing ">" or "/>" (closed: the element is empty).
func (p *fastParser) attrs(el *etree.Element) (closed, ok bool) {
	for {
		sp := p.space()
		switch {
		case p.eat('>'):
			return false, true
		case p.eat('/'):
			return true, p.eat('>')
		case !sp:
			return false, false
		}
		name, ok := p.name()
		if !ok || !p.eat('=') || p.i >= len(p.s) {
			return false, false
		}
		q := p.s[p.i]
		if q != '\'' && q != '"' {
			return false, false
		}
		p.i++
		end := strings.IndexByte(p.s[p.i:], q)
		if end < 0 {
			return false, false
		}
		raw := p.s[p.i : p.i+end]
		p.i += end + 1
		if strings.IndexByte(raw, '<') >= 0 {
			return false, false
		}
		v, ok := unescape(raw)
		if !ok {
			return false, false
		}
		space, key := splitName(name)
		for _, a := range el.Attr {
			if a.Space == space && a.Key == key {
				return false, false
			}
		}
		el.CreateAttr(name, v)
	}
}

// text reads character data up to the next "<" (or the end).
func (p *fastParser) text() (string, bool) {
	end := strings.IndexByte(p.s[p.i:], '<')
	if end < 0 {
		end = len(p.s) - p.i
	}
	raw := p.s[p.i : p.i+end]
	p.i += end
	if strings.Contains(raw, "]]>") {
		return "", false
	}
	return unescape(raw)
}

// comment reads a comment whose body has no "--" and does not end in "-"
// (what encoding/xml refuses), and no byte plainChars refuses.
func (p *fastParser) comment() (string, bool) {
	rest := p.s[p.i+4:]
	end := strings.Index(rest, "--")
	if end < 0 || !strings.HasPrefix(rest[end:], "-->") {
		return "", false
	}
	body := rest[:end]
	if !plainChars(body) || strings.HasSuffix(body, "-") {
		return "", false
	}
	p.i += 4 + end + 3
	return body, true
}

// unescape checks raw text or an attribute value (plainChars) and decodes
// the predefined entities; any other reference is refused.
func unescape(raw string) (string, bool) {
	if !plainChars(raw) {
		return "", false
	}
	amp := strings.IndexByte(raw, '&')
	if amp < 0 {
		return raw, true
	}
	var b strings.Builder
	b.Grow(len(raw))
	for amp >= 0 {
		b.WriteString(raw[:amp])
		raw = raw[amp:]
		semi := strings.IndexByte(raw, ';')
		if semi < 0 {
			return "", false
		}
		switch raw[1:semi] {
		case "lt":
			b.WriteByte('<')
		case "gt":
			b.WriteByte('>')
		case "amp":
			b.WriteByte('&')
		case "apos":
			b.WriteByte('\'')
		case "quot":
			b.WriteByte('"')
		default:
			return "", false
		}
		raw = raw[semi+1:]
		amp = strings.IndexByte(raw, '&')
	}
	b.WriteString(raw)
	return b.String(), true
}

// plainChars reports whether s holds only characters XML allows other than
// a carriage return (which readers rewrite): tab, newline, printable ASCII
// and valid UTF-8 of other characters but U+FFFE and U+FFFF.
func plainChars(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == 0xFFFE || r == 0xFFFF {
			return false
		}
		i += size
	}
	return true
}

// isSpaceText reports whether s is only spaces, tabs and newlines.
func isSpaceText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != ' ' && c != '\t' && c != '\n' {
			return false
		}
	}
	return true
}

// splitName splits a name as etree does (at its first colon).
func splitName(n string) (space, local string) {
	if i := strings.IndexByte(n, ':'); i >= 0 {
		return n[:i], n[i+1:]
	}
	return "", n
}

// rawTag is el's name as written.
func rawTag(el *etree.Element) string {
	if el.Space == "" {
		return el.Tag
	}
	return el.Space + ":" + el.Tag
}
