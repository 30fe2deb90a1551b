package job

import (
	"fmt"
	"strings"
)

// Error codes carried by FieldError.Code. docs/job-format.md lists each with
// the shape of its message.
const (
	CodeSyntax       = "syntax"        // the document is not well-formed JSON
	CodeEncoding     = "encoding"      // the document is not valid UTF-8
	CodeTooLarge     = "too_large"     // a size limit was exceeded
	CodeTooDeep      = "too_deep"      // JSON nesting deeper than MaxDepth
	CodeType         = "type"          // the JSON type of a value is wrong
	CodeUnknownField = "unknown_field" // a key this version does not define
	CodeDuplicateKey = "duplicate_key" // the same key twice in one object
	CodeRequired     = "required"      // a required field is missing or empty
	CodeInvalid      = "invalid"       // the value has the wrong form
	CodeOutOfRange   = "out_of_range"  // a number outside its allowed range
	CodeConflict     = "conflict"      // fields that cannot be used together
	CodeDuplicate    = "duplicate"     // a value that must be unique is repeated
	CodeNotFound     = "not_found"     // a named thing (timezone, secret) does not exist
	CodeUnsupported  = "unsupported"   // a version or feature this build does not support
)

// FieldError is one problem with a job document.
type FieldError struct {
	// Field is the path of the offending field, e.g. "nics[0].ipv4.address";
	// empty for problems with the document as a whole.
	Field string `json:"field"`
	// Code is one of the Code* constants.
	Code string `json:"code"`
	// Message says what is wrong and quotes the offending value.
	Message string `json:"message"`
}

// String formats the error as "field: message" (or just the message).
func (e FieldError) String() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Report collects the problems found in a job document.
type Report struct {
	Errors []FieldError `json:"errors"`

	max     int // when not 0, the most Errors kept (Parse sets MaxProblems)
	dropped int // problems not kept for max
}

// Add records a problem with the field at path.
func (r *Report) Add(path, code, format string, args ...any) {
	if r.max > 0 && len(r.Errors) >= r.max {
		r.dropped++ // not even formatted
		return
	}
	r.Errors = append(r.Errors, FieldError{Field: path, Code: code, Message: fmt.Sprintf(format, args...)})
}

// add records e, or counts it as dropped when the report is full.
func (r *Report) add(e FieldError) {
	if r.max > 0 && len(r.Errors) >= r.max {
		r.dropped++
		return
	}
	r.Errors = append(r.Errors, e)
}

// capped returns the report with at most max problems, the last message
// saying how many more were found ("… and 7 more; stopped after 100
// problems").
func (r Report) capped() Report {
	if r.max > 0 && len(r.Errors) > r.max {
		r.dropped += len(r.Errors) - r.max
		r.Errors = r.Errors[:r.max]
	}
	if r.dropped > 0 && len(r.Errors) > 0 {
		last := &r.Errors[len(r.Errors)-1]
		last.Message += fmt.Sprintf(" (… and %d more; stopped after %d problems)", r.dropped, len(r.Errors))
	}
	r.max, r.dropped = 0, 0
	return r
}

// Merge appends the problems of another report.
func (r *Report) Merge(o Report) { r.Errors = append(r.Errors, o.Errors...) }

// OK reports whether no problem was recorded.
func (r *Report) OK() bool { return len(r.Errors) == 0 }

// Err returns nil when the report is empty and a *ValidationError otherwise.
func (r *Report) Err() error {
	if r.OK() {
		return nil
	}
	return &ValidationError{Errors: append([]FieldError(nil), r.Errors...)}
}

// ValidationError is returned for a job document with one or more problems.
type ValidationError struct {
	Errors []FieldError
}

// Error lists every problem, one "field: message" per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		lines[i] = fe.String()
	}
	if len(lines) == 1 {
		return "invalid job: " + lines[0]
	}
	return fmt.Sprintf("invalid job (%d problems):\n  %s", len(lines), strings.Join(lines, "\n  "))
}

// join builds a child path: join("nics[0]", "mac") = "nics[0].mac".
func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// Index builds an element path: Index("nics", 0) = "nics[0]".
func Index(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }

// Quote shortens long values so messages stay readable, then quotes them.
func Quote(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && !validRuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q…(%d bytes)", s[:cut], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func validRuneStart(b byte) bool { return b&0xC0 != 0x80 }
