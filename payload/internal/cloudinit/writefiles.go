package cloudinit

import (
	"bytes"
)

// The write_files fast path (issue 14).
//
// go-yaml encodes a struct by reflection and analyses every scalar
// (yaml_emitter_analyze_scalar) before choosing its style: ~10 µs per
// write_files entry here, 13 % of `vmpayload build` for a job with 200
// files. Most entries are made of scalars whose encoding follows from a few
// of go-yaml's rules (go.yaml.in/yaml/v3 v3.0.6, the encoder marshalYAML
// sets up: indent 2, unlimited line width, unicode on):
//
//   - a string is written plain when it would resolve to !!str unquoted
//     (resolve), is no YAML 1.1 boolean or base-60 number (isOldBool,
//     isBase60Float), and the emitter's analysis allows a plain scalar in
//     block context; a string of printable ASCII other than space whose
//     first byte is a letter, '/' or '_' and whose last byte is not ':'
//     resolves to !!str unless it is one of the words in yamlWords (the
//     resolver looks only at the first byte before its word table), and
//     the analysis finds no indicator in it (those that matter after the
//     first byte are ": " / ":" at the end and " #"; the flow indicators
//     matter only in flow context). Without spaces or line breaks there is
//     nowhere to fold, so it is written as it is;
//   - a string that resolves to another type is written double-quoted:
//     "" (null) and one of up to eight ASCII digits (an int, or a float for
//     a non-octal "089") come out as "" and "0644", nothing escaped;
//   - defer: true is a plain bool.
//
// encodeCloudConfig writes the entries of that class itself and lets
// go-yaml write the rest of the document around a one-entry write_files
// whose path is a placeholder derived from the content hash (like the big
// contents' placeholders, see detachBigContents: no input can spell it);
// the placeholder entry, as the same code writes it, is then replaced by
// the entries. A config with any entry outside the class (multi-line text,
// a space or a non-ASCII character in a path, a reserved word, an owner
// like "1000:1000") goes through go-yaml whole, as before. The
// differential tests (writefiles_test.go, FuzzWriteFilesYAML) hold the
// result to go-yaml's bytes; the class is re-checked against go-yaml's
// source when go.mod moves to another go-yaml version.

// writeFilesPlaceholder starts the path of the placeholder entry.
const writeFilesPlaceholder = "vmpayload-write-files-"

// encodeCloudConfig encodes cc exactly as marshalYAML(cc) does. fast tells
// whether the write_files entries were written by appendWriteFile. key
// must be derived from everything cc can contain (the content hash is).
func encodeCloudConfig(cc *CloudConfig, key string) (doc []byte, fast bool, err error) {
	if len(cc.WriteFiles) == 0 {
		doc, err = marshalYAML(cc)
		return doc, false, err
	}
	entries, ok := appendWriteFiles(nil, cc.WriteFiles)
	if !ok {
		doc, err = marshalYAML(cc)
		return doc, false, err
	}
	ph := []WriteFile{{Path: writeFilesPlaceholder + key}}
	want, ok := appendWriteFiles(nil, ph)
	if !ok {
		doc, err = marshalYAML(cc)
		return doc, false, err
	}
	c := *cc
	c.WriteFiles = ph
	doc, err = marshalYAML(&c)
	if err != nil {
		return nil, false, err
	}
	at, ok := placeholderEntry(doc, want)
	if !ok {
		// go-yaml wrote the placeholder entry otherwise than expected (or
		// it is not unique): its own encoding of the whole config is the
		// reference
		doc, err = marshalYAML(cc)
		return doc, false, err
	}
	out := make([]byte, 0, len(doc)-len(want)+len(entries))
	out = append(out, doc[:at]...)
	out = append(out, entries...)
	out = append(out, doc[at+len(want):]...)
	return out, true, nil
}

// placeholderEntry returns where want, the encoded placeholder entry,
// stands in doc: once, as the whole value of a top-level write_files key.
func placeholderEntry(doc, want []byte) (int, bool) {
	const key = "write_files:\n"
	at := bytes.Index(doc, want)
	if at < len(key) || bytes.LastIndex(doc, want) != at {
		return 0, false
	}
	start := at - len(key)
	if string(doc[start:at]) != key || start > 0 && doc[start-1] != '\n' {
		return 0, false
	}
	// the entry must be the whole sequence: what follows is another
	// top-level key or the end
	if end := at + len(want); end < len(doc) && (doc[end] == ' ' || doc[end] == '-') {
		return 0, false
	}
	return at, true
}

// appendWriteFiles appends the block sequence items go-yaml writes for
// files as the value of a top-level key, and reports whether every scalar
// was in the class this file describes (when not, b is of no use).
func appendWriteFiles(b []byte, files []WriteFile) ([]byte, bool) {
	n := 0
	for i := range files {
		f := &files[i]
		n += 64 + len(f.Path) + len(f.Content) + len(f.Encoding) + len(f.Permissions) + len(f.Owner)
	}
	if b == nil {
		b = make([]byte, 0, n)
	}
	for i := range files {
		var ok bool
		if b, ok = appendWriteFile(b, &files[i]); !ok {
			return b, false
		}
	}
	return b, true
}

// appendWriteFile appends one entry of write_files, in WriteFile's field
// order, without the fields omitempty leaves out.
func appendWriteFile(b []byte, f *WriteFile) ([]byte, bool) {
	var ok bool
	b = append(b, "  - path: "...)
	if b, ok = appendScalar(b, f.Path); !ok {
		return b, false
	}
	b = append(b, "\n    content: "...)
	if b, ok = appendScalar(b, f.Content); !ok {
		return b, false
	}
	if f.Encoding != "" {
		b = append(b, "\n    encoding: "...)
		if b, ok = appendScalar(b, f.Encoding); !ok {
			return b, false
		}
	}
	if f.Permissions != "" {
		b = append(b, "\n    permissions: "...)
		if b, ok = appendScalar(b, f.Permissions); !ok {
			return b, false
		}
	}
	if f.Owner != "" {
		b = append(b, "\n    owner: "...)
		if b, ok = appendScalar(b, f.Owner); !ok {
			return b, false
		}
	}
	if f.Defer {
		b = append(b, "\n    defer: true"...)
	}
	return append(b, '\n'), true
}

// appendScalar appends s as go-yaml writes a string value in a block
// mapping, when s is in the class this file describes.
func appendScalar(b []byte, s string) ([]byte, bool) {
	switch {
	case plainString(s):
		return append(b, s...), true
	case s == "" || digitString(s):
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"'), true
	}
	return b, false
}

// plainString reports whether go-yaml writes s plain, as it is, by the
// rules this file describes.
func plainString(s string) bool {
	if s == "" || s[len(s)-1] == ':' {
		return false
	}
	if c := s[0]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '/' || c == '_') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return !yamlWords(s)
}

// yamlWords reports whether s is one of the words go-yaml's resolver or
// its YAML 1.1 compatibility quotes (booleans and null) that start with a
// letter.
func yamlWords(s string) bool {
	switch s {
	case "true", "True", "TRUE", "false", "False", "FALSE",
		"null", "Null", "NULL",
		"y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return true
	}
	return false
}

// digitString reports whether s is one to eight ASCII digits (which go-yaml
// resolves to an int or a float, so it quotes them).
func digitString(s string) bool {
	if len(s) == 0 || len(s) > 8 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
