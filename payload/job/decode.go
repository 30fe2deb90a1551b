package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest JSON nesting accepted in a job document.
const MaxDepth = 32

// MaxProblems is the most problems Parse reports for one document. A job
// that breaks more rules than this is reported with its first MaxProblems
// (the last message says how many more there were): the answer stays small
// and each problem costs its position and message only once, so a 1 MB
// document of repeated keys is answered in one linear pass.
const MaxProblems = 100

// Parse decodes and validates a job document. It returns the job (possibly
// partially filled when there are problems) and a report of every problem
// found: JSON syntax (with line and column), unknown keys, duplicate keys,
// wrong types and invalid values.
func Parse(data []byte) (*Job, Report) {
	return parse(data, (*Job).Validate)
}

func parse(data []byte, validate func(*Job) Report) (*Job, Report) {
	r := Report{max: MaxProblems}
	j := decode(data, &r)
	if j == nil {
		return nil, r.capped()
	}
	// A field that failed to decode is left empty; do not also report it
	// (or what is under it) as missing or invalid.
	broken := map[string]bool{}
	for _, e := range r.Errors {
		if (e.Code == CodeType || e.Code == CodeOutOfRange) && e.Field != "" {
			broken[e.Field] = true
		}
	}
	for _, e := range validate(j).Errors {
		if !under(e.Field, broken) {
			r.add(e)
		}
	}
	return j, r.capped()
}

// under reports whether field is one of paths or lies inside one of them
// ("a.b[2].c" is inside "a", "a.b" and "a.b[2]"). It looks up each of the
// field's ancestors, so it costs the field's length, not the set's size.
func under(field string, paths map[string]bool) bool {
	if len(paths) == 0 {
		return false
	}
	if paths[field] {
		return true
	}
	for i := 1; i < len(field); i++ {
		if (field[i] == '.' || field[i] == '[') && paths[field[:i]] {
			return true
		}
	}
	return false
}

func decode(data []byte, r *Report) *Job {
	if len(data) > MaxJobBytes {
		r.Add("", CodeTooLarge, "job document is %d bytes; the limit is %d", len(data), MaxJobBytes)
		return nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		r.Add("", CodeSyntax, "job document is empty")
		return nil
	}
	if !utf8.Valid(data) {
		off := invalidUTF8Offset(data)
		line, col := LineCol(data, int64(off))
		r.Add("", CodeEncoding, "job document is not valid UTF-8 (line %d, column %d)", line, col)
		return nil
	}
	tree, err := parseTree(data, r)
	if err != nil {
		r.Errors = append(r.Errors, *err)
		return nil
	}
	obj, ok := tree.(*object)
	if !ok {
		r.Add("", CodeType, "job document must be a JSON object, got %s", describe(tree))
		return nil
	}
	var j Job
	decodeValue(reflect.ValueOf(&j).Elem(), obj, "", r)
	return &j
}

// object is a JSON object that remembers key order and duplicate keys.
type object struct {
	keys   []string
	values map[string]any
}

// parser reads a document into a tree of *object, []any, string, bool,
// json.Number and nil. Duplicate keys are recorded and parsing goes on, so
// they are reported together with every other problem.
type parser struct {
	dec        *json.Decoder
	data       []byte
	duplicates []duplicate // the first MaxProblems+1, in the order found
	ndups      int         // all of them
}

// duplicate is a repeated key found by the parser; its line and column are
// worked out after parsing, for all duplicates in one pass (positions).
type duplicate struct {
	off        int64 // the opening quote of the repeated key
	field, key string
}

// parseTree reads data through encoding/json's token stream into a tree
// (see parser). Duplicate keys go to r; a syntax error, nesting deeper than
// MaxDepth or data after the first value is returned.
func parseTree(data []byte, r *Report) (any, *FieldError) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &parser{dec: dec, data: data}
	v, ferr := p.value("", "", self, 0)
	if ferr != nil {
		return nil, ferr
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		for end < int64(len(data)) && strings.IndexByte(" \t\r\n", data[end]) >= 0 {
			end++
		}
		line, col := LineCol(data, end)
		return nil, &FieldError{Code: CodeSyntax, Message: fmt.Sprintf("unexpected data after the job object at line %d, column %d", line, col)}
	}
	pos := positions(data, p.duplicates)
	for i, d := range p.duplicates {
		r.add(FieldError{Field: d.field, Code: CodeDuplicateKey, Message: fmt.Sprintf("key %s appears more than once in the same object (again at line %d, column %d)", Quote(d.key), pos[i].line, pos[i].col)})
	}
	r.dropped += p.ndups - len(p.duplicates)
	return v, nil
}

// syntaxError reports a JSON syntax error with the line and column of the
// offending character. json.Decoder.Token reports offsets relative to the
// value it was reading, so the position comes from a whole-document scan.
func syntaxError(data []byte, dec *json.Decoder, err error) *FieldError {
	off := dec.InputOffset()
	msg := err.Error()
	var se *json.SyntaxError
	if verr := json.Unmarshal(data, new(any)); errors.As(verr, &se) {
		msg = se.Error()
		off = se.Offset - 1 // Offset counts the offending byte
		if msg == "unexpected end of JSON input" {
			off = int64(len(data))
		}
	} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		msg = "unexpected end of JSON input"
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	line, col := LineCol(data, off)
	return &FieldError{Code: CodeSyntax, Message: fmt.Sprintf("%s at line %d, column %d", msg, line, col)}
}

// value reads the value at parent's key (or, for idx ≥ 0, parent's
// element idx). Its path is built only for an object or array: a document
// of half a million numbers makes no path strings.
func (p *parser) value(parent, key string, idx, depth int) (any, *FieldError) {
	dec, data := p.dec, p.data
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxError(data, dec, err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	path := childPath(parent, key, idx)
	if depth >= MaxDepth {
		return nil, &FieldError{Field: path, Code: CodeTooDeep, Message: fmt.Sprintf("JSON nesting is deeper than %d levels", MaxDepth)}
	}
	switch d {
	case '{':
		o := &object{values: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, syntaxError(data, dec, err)
			}
			key, _ := kt.(string)
			keyEnd := dec.InputOffset()
			v, ferr := p.value(path, key, -1, depth+1)
			if ferr != nil {
				return nil, ferr
			}
			if _, dup := o.values[key]; dup {
				// Only the offset is kept; the line and column of the
				// few that are reported come from one pass at the end.
				p.ndups++
				if len(p.duplicates) <= MaxProblems {
					p.duplicates = append(p.duplicates, duplicate{off: keyStart(data, keyEnd), field: join(path, key), key: key})
				}
				continue // the first occurrence wins
			}
			o.keys = append(o.keys, key)
			o.values[key] = v
		}
		if _, err := dec.Token(); err != nil {
			return nil, syntaxError(data, dec, err)
		}
		return o, nil
	default: // '['
		var list []any
		for i := 0; dec.More(); i++ {
			v, ferr := p.value(path, "", i, depth+1)
			if ferr != nil {
				return nil, ferr
			}
			list = append(list, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, syntaxError(data, dec, err)
		}
		if list == nil {
			list = []any{}
		}
		return list, nil
	}
}

// childPath is join(parent, key) for idx -1, Index(parent, idx) for
// idx ≥ 0 and parent itself for idx self.
func childPath(parent, key string, idx int) string {
	switch {
	case idx >= 0:
		return Index(parent, idx)
	case idx == self:
		return parent
	}
	return join(parent, key)
}

// self is the idx of childPath that names parent itself.
const self = -2

// valueDecoder is implemented by types with their own JSON shape rules.
type valueDecoder interface {
	decodeJSON(v any, path string, r *Report)
}

var valueDecoderType = reflect.TypeOf((*valueDecoder)(nil)).Elem()

func decodeValue(dst reflect.Value, v any, path string, r *Report) {
	if v == nil { // JSON null: leave the zero value
		return
	}
	if dst.CanAddr() && dst.Addr().Type().Implements(valueDecoderType) {
		dst.Addr().Interface().(valueDecoder).decodeJSON(v, path, r)
		return
	}
	switch dst.Kind() {
	case reflect.Pointer:
		n := reflect.New(dst.Type().Elem())
		before := len(r.Errors)
		decodeValue(n.Elem(), v, path, r)
		for _, e := range r.Errors[before:] {
			if e.Field == path && e.Code == CodeType {
				return // wrong JSON type: leave the field unset
			}
		}
		dst.Set(n)
	case reflect.Struct:
		obj, ok := expect[*object](v, path, "an object", r)
		if !ok {
			return
		}
		fields := jsonFields(dst.Type())
		for _, k := range obj.keys {
			idx, known := fields[k]
			if !known {
				r.Add(join(path, k), CodeUnknownField, "unknown field %s (job format version %d)", Quote(k), Version)
				continue
			}
			decodeValue(dst.Field(idx), obj.values[k], join(path, k), r)
		}
	case reflect.String:
		if s, ok := expect[string](v, path, "a string", r); ok {
			dst.SetString(s)
		}
	case reflect.Bool:
		if b, ok := expect[bool](v, path, "true or false", r); ok {
			dst.SetBool(b)
		}
	case reflect.Int:
		n, ok := expect[json.Number](v, path, "an integer", r)
		if !ok {
			return
		}
		i, err := n.Int64()
		switch {
		case err == nil && i >= math.MinInt32 && i <= math.MaxInt32:
			dst.SetInt(i)
		case isIntegerLiteral(n.String()):
			r.Add(path, CodeOutOfRange, "number %s is out of range", n.String())
		default:
			r.Add(path, CodeType, "expected an integer, got %s", n.String())
		}
	case reflect.Slice:
		list, ok := expect[[]any](v, path, "an array", r)
		if !ok {
			return
		}
		s := reflect.MakeSlice(dst.Type(), len(list), len(list))
		for i, e := range list {
			if e == nil {
				r.Add(Index(path, i), CodeType, "expected %s, got null", kindName(dst.Type().Elem()))
				continue
			}
			decodeValue(s.Index(i), e, Index(path, i), r)
		}
		dst.Set(s)
	case reflect.Map: // map[string]any (meta_data)
		if obj, ok := expect[*object](v, path, "an object", r); ok {
			dst.Set(reflect.ValueOf(toPlain(obj, path, "", self, r).(map[string]any)))
		}
	default:
		r.Add(path, CodeType, "cannot decode into %s", dst.Type())
	}
}

func (c *Command) decodeJSON(v any, path string, r *Report) {
	switch t := v.(type) {
	case string:
		c.Shell = t
	case []any:
		c.Argv = make([]string, 0, len(t))
		for i, e := range t {
			if s, ok := expect[string](e, Index(path, i), "a string (argv element)", r); ok {
				c.Argv = append(c.Argv, s)
			}
		}
	default:
		r.Add(path, CodeType, "expected a string (shell command) or an array of strings (argv), got %s", describe(v))
	}
}

// MarshalJSON writes the command back in the shape it was given.
func (c Command) MarshalJSON() ([]byte, error) {
	if c.Argv != nil {
		return json.Marshal(c.Argv)
	}
	return json.Marshal(c.Shell)
}

// toPlain converts a parsed tree to plain Go values (map[string]any, []any,
// string, bool, json.Number turned into int64 or float64).
// A number that fits neither int64 nor a finite float64 is reported as
// out of range.
//
// The value is at childPath(parent, key, idx), a path built only when it
// is needed.
func toPlain(v any, parent, key string, idx int, r *Report) any {
	switch t := v.(type) {
	case *object:
		path := childPath(parent, key, idx)
		m := make(map[string]any, len(t.keys))
		for _, k := range t.keys {
			m[k] = toPlain(t.values[k], path, k, -1, r)
		}
		return m
	case []any:
		path := childPath(parent, key, idx)
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = toPlain(e, path, "", i, r)
		}
		return out
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, err := t.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			r.Add(childPath(parent, key, idx), CodeOutOfRange, "number %s is out of range", t.String())
			return nil
		}
		return f
	default:
		return v
	}
}

// expect returns v as a T, or reports at path that it is not what (a
// description of T: "a string") and returns false.
func expect[T any](v any, path, what string, r *Report) (T, bool) {
	t, ok := v.(T)
	if !ok {
		r.Add(path, CodeType, "expected %s, got %s", what, describe(v))
	}
	return t, ok
}

func isIntegerLiteral(s string) bool {
	return !strings.ContainsAny(s, ".eE")
}

func jsonFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	return m
}

func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		return "string " + Quote(t)
	case bool:
		return fmt.Sprintf("boolean %t", t)
	case json.Number:
		return "number " + t.String()
	case *object:
		return "an object"
	case []any:
		return "an array"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func kindName(t reflect.Type) string {
	if t == reflect.TypeOf(Command{}) {
		return "a string (shell command) or an array of strings (argv)"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice:
		return "an array"
	default:
		return "a value"
	}
}

// LineCol turns a byte offset into a 1-based line and column; the column
// counts characters, not bytes.
func LineCol(data []byte, off int64) (line, col int) {
	return advance(data[:min(off, int64(len(data)))], 1, 1)
}

// advance returns the line and column after data of a position at line
// and col.
func advance(data []byte, line, col int) (int, int) {
	for _, b := range data {
		switch {
		case b == '\n':
			line++
			col = 1
		case validRuneStart(b):
			col++
		}
	}
	return line, col
}

type lineColumn struct{ line, col int }

// positions returns the line and column of each duplicate's offset, as
// LineCol would, in one forward pass over data: the offsets are visited in
// increasing order (a duplicate inside a repeated key's value is found
// before that key), each continuing from the one before.
func positions(data []byte, dups []duplicate) []lineColumn {
	out := make([]lineColumn, len(dups))
	order := make([]int, len(dups))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return dups[order[a]].off < dups[order[b]].off })
	var at int64
	line, col := 1, 1
	for _, i := range order {
		off := min(dups[i].off, int64(len(data)))
		line, col = advance(data[at:off], line, col)
		at = off
		out[i] = lineColumn{line, col}
	}
	return out
}

// keyStart finds the opening quote of the object key that ends just before
// off (json.Decoder leaves InputOffset after the closing quote).
func keyStart(data []byte, off int64) int64 {
	i := off - 2 // the byte before the closing quote
	for ; i >= 0; i-- {
		if data[i] != '"' {
			continue
		}
		n := 0
		for k := i - 1; k >= 0 && data[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i
		}
	}
	return off
}

func invalidUTF8Offset(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(data)
}
