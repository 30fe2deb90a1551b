package cloudinit

import (
	"encoding"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// The YAML fast path (issue 14).
//
// go-yaml encodes by reflection into a queue of events that its emitter
// analyses scalar by scalar before it writes them: ~0.1 ms of the ~0.18 ms
// a typical job's render takes, and a fifth of what a burst of start jobs
// allocates. fastYAML writes the same bytes itself for the documents made
// of what the generated documents are made of: structs with `yaml:"name"`
// or `yaml:"name,omitempty"` tags, string-keyed maps, slices, strings,
// ints and bools, laid out in block style as marshalYAML's encoder lays
// them out (go.yaml.in/yaml/v3 v3.0.6, indent 2, unlimited width). Every
// string must be in a class whose encoding follows from a few of go-yaml's
// rules (scalarStyle says which); anything else (an empty collection, a
// nil without omitempty, a float, a tab, a non-ASCII character, a string
// go-yaml would single-quote or escape, a literal block with a leading
// space, trailing blank lines or a space before a line break, a
// multi-line string in a sequence, a type with its own marshaller) makes
// fastYAML give up, and go-yaml encodes the whole document as before. The
// differential tests (fastyaml_test.go, FuzzFastYAML) hold it to go-yaml's
// bytes; re-check the rules against go-yaml's source when go.mod moves to
// another version.

// scalar styles fastYAML writes.
const (
	stylePlain   = iota + 1 // as it is
	styleQuoted             // "…", nothing inside needs escaping
	styleLiteral            // |, or |- without a final line break
)

// base60Float is YAML 1.1's sexagesimal number (190:20:30), which go-yaml
// quotes for YAML 1.1 readers (PyYAML reads 1:2 as 62).
var base60Float = regexp.MustCompile(`^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`)

// scalarStyle returns how go-yaml writes the string s as a value in a block
// collection, when fastYAML can write it the same way (ok false otherwise).
//
//   - "" and strings that would resolve to another type unquoted (null,
//     booleans of YAML 1.2 and 1.1, numbers, base-60 numbers) are written
//     double-quoted; the ones accepted here need no escape inside.
//   - Single-line printable ASCII is written plain when it resolves to a
//     string and the emitter's analysis allows a plain scalar in block
//     context: no leading or trailing space, no ": ", " #" or final ':',
//     and a first byte that is no indicator. A letter, '/', '_' or '$'
//     first resolves to a string unless the whole is one of yamlWords; a
//     digit first is accepted only in shapes no number or timestamp has:
//     a '/' (an address with a prefix length), a ':' without '-' (an IPv6
//     or MAC address; base-60 numbers among them are quoted), or only
//     digits and at least two dots (an IPv4 address); digits alone are
//     quoted.
//   - A string with line breaks is a literal block when it is printable
//     ASCII otherwise, does not start with a space or a line break (that
//     needs an indentation indicator), has no space before a line break or
//     at its end, and ends in at most one line break.
func scalarStyle(s string) (style int, ok bool) {
	if s == "" {
		return styleQuoted, true
	}
	lines := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\n':
			lines = true
			if i > 0 && s[i-1] == ' ' {
				return 0, false
			}
		case c < ' ' || c > '~':
			return 0, false
		}
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return 0, false
	}
	if lines {
		if s[0] == '\n' || strings.HasSuffix(s, "\n\n") {
			return 0, false
		}
		return styleLiteral, true
	}
	if s[len(s)-1] == ':' || strings.Contains(s, ": ") || strings.Contains(s, " #") {
		return 0, false
	}
	switch c := s[0]; {
	case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '/' || c == '_' || c == '$':
		if yamlWords(s) {
			return styleQuoted, true
		}
		return stylePlain, true
	case '0' <= c && c <= '9':
		return digitFirstStyle(s)
	}
	return 0, false
}

// isDashedUUID reports whether s is a UUID in its 8-4-4-4-12 form.
func isDashedUUID(s string) bool {
	return len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' && domxml.IsUUID(s)
}

// digitFirstStyle is scalarStyle for a single-line string of printable
// ASCII without ": " that starts with a digit.
func digitFirstStyle(s string) (int, bool) {
	if isDashedUUID(s) {
		// an instance-id: with four dashes inside and its first after
		// eight characters it is no number and no date, so go-yaml
		// writes it plain (about 5 in 8 random UUIDs start with a digit)
		return stylePlain, true
	}
	var slash, colon, dots, other bool
	ndots := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
		case c == '/':
			slash = true
		case c == ':':
			colon = true
		case c == '.':
			ndots++
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			other = true
		default:
			// a space, '-', '_', '+' and the rest: numbers, timestamps
			// and the analysis's indicators live here
			return 0, false
		}
	}
	dots = ndots >= 2
	switch {
	case slash:
		// no number, timestamp or base-60 number has a '/'
		return stylePlain, true
	case colon:
		// no number has a ':', a timestamp has a '-' before it
		if base60Float.MatchString(s) {
			return styleQuoted, true
		}
		return stylePlain, true
	case other:
		// 0x1f, 1e5, 0b1, 0o7 and such are numbers
		return 0, false
	case ndots == 0:
		if len(s) > 18 {
			return 0, false
		}
		return styleQuoted, true // an int
	case dots:
		// a float has one dot at most
		return stylePlain, true
	}
	return 0, false // 1.5, 1.: floats
}

// fastYAML encodes v as marshalYAML does, or reports false when v holds
// something outside what the fast path writes (see above).
func fastYAML(v any) ([]byte, bool) {
	e := yamlWriter{b: make([]byte, 0, 1024)}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return nil, false
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Struct, reflect.Map:
	default:
		return nil, false
	}
	n, ok := e.mapping(rv, 0, false)
	if !ok || n == 0 {
		return nil, false // go-yaml writes an empty mapping as {}
	}
	return e.b, true
}

// yamlWriter appends a block-style document to b.
type yamlWriter struct {
	b []byte
}

func (e *yamlWriter) indent(n int) {
	for ; n > 0; n-- {
		e.b = append(e.b, ' ')
	}
}

// field is one exported, tagged field of a struct type.
type field struct {
	index     int
	name      string
	omitEmpty bool
}

var fieldCache sync.Map // reflect.Type → []field, or nil when unsupported

// fieldsOf returns the fields fastYAML writes of struct type t, in order,
// or false when t has a field it does not handle (no tag, a flag other
// than omitempty, an unexported field) or a marshaller of its own.
func fieldsOf(t reflect.Type) ([]field, bool) {
	if f, ok := fieldCache.Load(t); ok {
		fs := f.([]field)
		return fs, fs != nil
	}
	var fs []field
	ok := !hasMarshaller(t)
	for i := 0; ok && i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, has := sf.Tag.Lookup("yaml")
		if !sf.IsExported() || !has || sf.Anonymous {
			ok = false
			break
		}
		name, flags, _ := strings.Cut(tag, ",")
		if name == "-" && flags == "" {
			continue
		}
		if name == "" || (flags != "" && flags != "omitempty") {
			ok = false
			break
		}
		fs = append(fs, field{index: i, name: name, omitEmpty: flags == "omitempty"})
	}
	if !ok || fs == nil {
		fs = nil
		ok = false
	}
	fieldCache.Store(t, fs)
	return fs, ok
}

// special are the types go-yaml writes its own way before it looks at a
// value's kind (time.Duration is an int64 written as "1s"), and the
// interfaces it asks first: marshallers, and IsZero for omitempty.
var (
	specialTypes  = []reflect.Type{reflect.TypeFor[time.Duration](), reflect.TypeFor[time.Time](), reflect.TypeFor[yaml.Node]()}
	specialIfaces = []reflect.Type{reflect.TypeFor[yaml.Marshaler](), reflect.TypeFor[encoding.TextMarshaler](), reflect.TypeFor[yaml.IsZeroer]()}
)

// hasMarshaller reports whether go-yaml writes values of type t its own
// way: t is one of specialTypes, or t or *t implements one of
// specialIfaces. (Type.Implements, not a look at t's methods by index:
// that would make the linker keep every exported method in the binary.)
func hasMarshaller(t reflect.Type) bool {
	for _, s := range specialTypes {
		if t == s {
			return true
		}
	}
	pt := reflect.PointerTo(t)
	for _, i := range specialIfaces {
		if t.Implements(i) || pt.Implements(i) {
			return true
		}
	}
	return false
}

// entry is one key and value of a mapping being written.
type entry struct {
	key string
	val reflect.Value
}

// mapping writes the entries of struct or map v at indent n and returns
// how many it wrote. inSeq says v is an item of a block sequence: its first
// entry goes on the line the caller started with "- ".
func (e *yamlWriter) mapping(v reflect.Value, n int, inSeq bool) (int, bool) {
	var ents []entry
	switch v.Kind() {
	case reflect.Struct:
		fs, ok := fieldsOf(v.Type())
		if !ok {
			return 0, false
		}
		ents = make([]entry, 0, len(fs))
		for _, f := range fs {
			fv := v.Field(f.index)
			if f.omitEmpty && isEmptyValue(fv) {
				continue
			}
			ents = append(ents, entry{f.name, fv})
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String || hasMarshaller(v.Type().Key()) {
			return 0, false
		}
		ents = make([]entry, 0, v.Len())
		it := v.MapRange()
		for it.Next() {
			ents = append(ents, entry{it.Key().String(), it.Value()})
		}
		sortKeys(ents)
	default:
		return 0, false
	}
	for i, en := range ents {
		if st, ok := scalarStyle(en.key); !ok || st != stylePlain || len(en.key) > 128 || strings.ContainsAny(en.key, "0123456789") {
			return 0, false
		}
		if i > 0 || !inSeq {
			e.indent(n)
		}
		e.b = append(e.b, en.key...)
		e.b = append(e.b, ':')
		if !e.value(en.val, n) {
			return 0, false
		}
	}
	return len(ents), true
}

// value writes v as the value of a mapping entry whose key is at indent n,
// after the key's ':'.
func (e *yamlWriter) value(v reflect.Value, n int) bool {
	v, ok := deref(v)
	if !ok {
		return false
	}
	switch v.Kind() {
	case reflect.Struct, reflect.Map:
		e.b = append(e.b, '\n')
		c, ok := e.mapping(v, n+2, false)
		return ok && c > 0
	case reflect.Slice, reflect.Array:
		if v.Len() == 0 || v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return false
		}
		e.b = append(e.b, '\n')
		return e.sequence(v, n+2)
	case reflect.String:
		s := v.String()
		st, ok := scalarStyle(s)
		if !ok {
			return false
		}
		e.b = append(e.b, ' ')
		if st == styleLiteral {
			e.literal(s, n+2)
			return true
		}
		e.scalar(s, st)
		e.b = append(e.b, '\n')
		return true
	default:
		e.b = append(e.b, ' ')
		if !e.simple(v) {
			return false
		}
		e.b = append(e.b, '\n')
		return true
	}
}

// sequence writes the items of v at indent n.
func (e *yamlWriter) sequence(v reflect.Value, n int) bool {
	for i := 0; i < v.Len(); i++ {
		it, ok := deref(v.Index(i))
		if !ok {
			return false
		}
		e.indent(n)
		e.b = append(e.b, "- "...)
		switch it.Kind() {
		case reflect.Struct, reflect.Map:
			c, ok := e.mapping(it, n+2, true)
			if !ok || c == 0 {
				return false
			}
		case reflect.String:
			st, ok := scalarStyle(it.String())
			if !ok || st == styleLiteral {
				return false
			}
			e.scalar(it.String(), st)
			e.b = append(e.b, '\n')
		case reflect.Slice, reflect.Array:
			return false
		default:
			if !e.simple(it) {
				return false
			}
			e.b = append(e.b, '\n')
		}
	}
	return true
}

// deref follows pointers and interfaces to the value go-yaml writes; a nil
// one (which go-yaml writes as null) is refused.
func deref(v reflect.Value) (reflect.Value, bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return v, false
		}
		if v.Kind() == reflect.Pointer && hasMarshaller(v.Type().Elem()) {
			return v, false
		}
		v = v.Elem()
	}
	if hasMarshaller(v.Type()) {
		return v, false
	}
	return v, true
}

// scalar writes a one-line string in style st (stylePlain or styleQuoted).
func (e *yamlWriter) scalar(s string, st int) {
	if st == styleQuoted {
		e.b = append(e.b, '"')
		e.b = append(e.b, s...)
		e.b = append(e.b, '"')
		return
	}
	e.b = append(e.b, s...)
}

// literal writes s as a literal block whose lines are at indent n (empty
// lines stay empty).
func (e *yamlWriter) literal(s string, n int) {
	e.b = append(e.b, '|')
	if !strings.HasSuffix(s, "\n") {
		e.b = append(e.b, '-')
	} else {
		s = s[:len(s)-1]
	}
	e.b = append(e.b, '\n')
	for line := range strings.SplitSeq(s, "\n") {
		if line != "" {
			e.indent(n)
			e.b = append(e.b, line...)
		}
		e.b = append(e.b, '\n')
	}
}

// simple writes an int, uint or bool as go-yaml does; other kinds are
// refused.
func (e *yamlWriter) simple(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Bool:
		e.b = strconv.AppendBool(e.b, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.b = strconv.AppendInt(e.b, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		e.b = strconv.AppendUint(e.b, v.Uint(), 10)
	default:
		return false
	}
	return true
}

// isEmptyValue is go-yaml's test for omitempty on the kinds fastYAML
// writes: a struct is empty when all its exported fields are.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return v.Len() == 0
	case reflect.Slice, reflect.Map, reflect.Array:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			if t.Field(i).IsExported() && !isEmptyValue(v.Field(i)) {
				return false
			}
		}
		return true
	}
	return false
}

// sortKeys orders mapping entries as go-yaml orders string keys without
// digits (mapping refuses the others: go-yaml compares runs of digits by
// their value): byte by byte, a byte that is no letter before any letter,
// otherwise by value, and a key before the keys it is a prefix of.
func sortKeys(ents []entry) {
	// insertion sort: mappings here have a handful of keys
	for i := 1; i < len(ents); i++ {
		for j := i; j > 0 && keyLess(ents[j].key, ents[j-1].key); j-- {
			ents[j], ents[j-1] = ents[j-1], ents[j]
		}
	}
}

// keyLess is sortKeys' order on ASCII keys without digits.
func keyLess(a, b string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		if la, lb := isLetter(a[i]), isLetter(b[i]); la != lb {
			return lb
		}
		return a[i] < b[i]
	}
	return len(a) < len(b)
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
