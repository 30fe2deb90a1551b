package job

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// scanTree is the single pass over a job document (issue 14): it builds the
// tree parseTree builds (*object, []any, string, bool, json.Number, nil) and
// records duplicate keys the same way, reading every byte once.
// encoding/json's token stream, which parseTree uses, reads each value twice
// (once to find its end, once to decode it), which was 31 % of a large job's
// `vmpayload build`.
//
// It handles well-formed documents within MaxDepth only. On anything else
// (a syntax error, nesting too deep, data after the object) it returns
// ok == false and the caller runs parseTree, so every error message, line
// and column stays exactly encoding/json's. data must be valid UTF-8.
//
// It stays under issue 33's rule (a copy stays only if it saves at least
// 1 % of the end-to-end work it serves), measured on test/bench's large job
// (200 files, 1 MB of content), alternated in one run on a shared 2-core
// machine: BenchmarkDecode/large 1.6-2.1 ms with it, 9.2-10.8 ms through
// parseTree alone (about json.Unmarshal's own time for the document: its
// strings are the cost); `vmpayload build` of that job as a process 23 ms
// with it, 35 ms without (+12 ms, 52 %), which is about 4 % of a ~300 ms
// VM start, and `vmpayload run` parses a job twice (client and agent). On
// the typical job the difference is within the noise.
// TestScanTreeMatchesParseTree and FuzzScanTree hold it to parseTree.
func scanTree(data []byte) (tree any, duplicates []FieldError, ok bool) {
	s := scanner{data: data}
	s.space()
	v, ok := s.value(nil, 0)
	if !ok {
		return nil, nil, false
	}
	s.space()
	if s.pos != len(data) {
		return nil, nil, false
	}
	return v, s.duplicates, true
}

type scanner struct {
	data       []byte
	pos        int
	duplicates []FieldError
}

// scanPath is the path to a value, built into a string only when a
// duplicate key needs it.
type scanPath struct {
	parent *scanPath
	key    string
	index  int // -1 for an object member
}

func (p *scanPath) String() string {
	if p == nil {
		return ""
	}
	if p.index >= 0 {
		return index(p.parent.String(), p.index)
	}
	return join(p.parent.String(), p.key)
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value reads one value starting at s.pos (no leading space).
func (s *scanner) value(path *scanPath, depth int) (any, bool) {
	if s.pos >= len(s.data) {
		return nil, false
	}
	switch c := s.data[s.pos]; c {
	case '{':
		if depth >= MaxDepth {
			return nil, false
		}
		return s.object(path, depth)
	case '[':
		if depth >= MaxDepth {
			return nil, false
		}
		return s.array(path, depth)
	case '"':
		return s.str()
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	case 'n':
		return nil, s.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return s.number()
		}
		return nil, false
	}
}

func (s *scanner) literal(word string) bool {
	if len(s.data)-s.pos < len(word) || string(s.data[s.pos:s.pos+len(word)]) != word {
		return false
	}
	s.pos += len(word)
	return true
}

func (s *scanner) object(path *scanPath, depth int) (any, bool) {
	s.pos++ // '{'
	o := &object{values: map[string]any{}}
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return o, true
	}
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return nil, false
		}
		keyStart := s.pos
		k, ok := s.str()
		if !ok {
			return nil, false
		}
		key := k.(string)
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return nil, false
		}
		s.pos++
		s.space()
		child := &scanPath{parent: path, key: key, index: -1}
		v, ok := s.value(child, depth+1)
		if !ok {
			return nil, false
		}
		if _, dup := o.values[key]; dup {
			s.duplicates = append(s.duplicates, duplicateKey(s.data, int64(keyStart), child.String(), key))
		} else {
			o.keys = append(o.keys, key)
			o.values[key] = v
		}
		if more, ok := s.after('}'); !ok || !more {
			return o, ok
		}
	}
}

func (s *scanner) array(path *scanPath, depth int) (any, bool) {
	s.pos++ // '['
	list := []any{}
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return list, true
	}
	for i := 0; ; i++ {
		v, ok := s.value(&scanPath{parent: path, index: i}, depth+1)
		if !ok {
			return nil, false
		}
		list = append(list, v)
		if more, ok := s.after(']'); !ok || !more {
			return list, ok
		}
	}
}

// after reads what follows a member of an object or array: a comma (more
// is true, and the space after it is skipped) or the closing delimiter.
func (s *scanner) after(closing byte) (more, ok bool) {
	s.space()
	if s.pos >= len(s.data) {
		return false, false
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		s.space()
		return true, true
	case closing:
		s.pos++
		return false, true
	}
	return false, false
}

// number reads a JSON number (RFC 8259 grammar) as json.Number.
func (s *scanner) number() (any, bool) {
	d, start := s.data, s.pos
	i := start
	digits := func() int {
		n := 0
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case digits() == 0:
		return nil, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if digits() == 0 {
			return nil, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	s.pos = i
	return json.Number(d[start:i]), true
}

// plainByte marks the bytes a JSON string holds as they are: not the quote,
// the backslash or a control character.
var plainByte = func() (t [256]bool) {
	for i := range t {
		t[i] = i >= 0x20 && i != '"' && i != '\\'
	}
	return t
}()

// plainRun returns the index of the first byte at or after i that is not
// plain (see plainByte), or len(d). It tests eight bytes at a time.
func plainRun(d []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(d); i += 8 {
		x := binary.LittleEndian.Uint64(d[i:])
		q := x ^ (ones * '"')
		b := x ^ (ones * '\\')
		// a byte below 0x20, a quote or a backslash makes its high bit set
		if ((x-ones*0x20)&^x|(q-ones)&^q|(b-ones)&^b)&highs != 0 {
			break
		}
	}
	for i < len(d) && plainByte[d[i]] {
		i++
	}
	return i
}

// str reads a JSON string starting at its opening quote and decodes it as
// encoding/json does (an unpaired surrogate escape becomes U+FFFD).
func (s *scanner) str() (any, bool) {
	d := s.data
	start := s.pos + 1
	i := plainRun(d, start)
	if i < len(d) && d[i] == '"' {
		s.pos = i + 1
		return string(d[start:i]), true
	}
	// escapes: size the result by the next quote (the end of the string
	// unless it holds an escaped quote; the result is never longer than
	// the escaped text), then decode
	hint := bytes.IndexByte(d[i:], '"')
	if hint < 0 {
		return nil, false
	}
	var b strings.Builder
	b.Grow(i - start + hint)
	b.Write(d[start:i])
	for {
		if i >= len(d) {
			return nil, false
		}
		switch c := d[i]; {
		case c == '"':
			s.pos = i + 1
			return b.String(), true
		case c < 0x20:
			return nil, false
		case c != '\\':
			j := plainRun(d, i+1)
			b.Write(d[i:j])
			i = j
			continue
		}
		if i+1 >= len(d) {
			return nil, false
		}
		switch e := d[i+1]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(d, i+2)
			if !ok {
				return nil, false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(d, i+2); ok && i+1 < len(d) && d[i] == '\\' && d[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						b.WriteRune(dec)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			b.WriteRune(r)
			continue
		default:
			return nil, false
		}
		i += 2
	}
}

// hex4 reads the four hex digits of a \u escape at d[i:].
func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
