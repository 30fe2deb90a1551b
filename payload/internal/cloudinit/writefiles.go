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
// whose path is a placeholder made from the placeholder key (like the big
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
// was in the class this file describes (when not, it appends nothing: the
// check comes first, so the fallback costs no allocation).
func appendWriteFiles(b []byte, files []WriteFile) ([]byte, bool) {
	n := 0
	for i := range files {
		f := &files[i]
		if !inClass(f.Path) || !inClass(f.Content) || !inClass(f.Encoding) || !inClass(f.Permissions) || !inClass(f.Owner) {
			return b, false
		}
		n += 64 + len(f.Path) + len(f.Content) + len(f.Encoding) + len(f.Permissions) + len(f.Owner)
	}
	if b == nil {
		b = make([]byte, 0, n)
	}
	for i := range files {
		b = appendWriteFile(b, &files[i])
	}
	return b, true
}

// appendWriteFile appends one entry of write_files, in WriteFile's field
// order, without the fields omitempty leaves out. Its strings are in the
// class (inClass).
func appendWriteFile(b []byte, f *WriteFile) []byte {
	b = append(b, "  - path: "...)
	b = appendScalar(b, f.Path)
	b = append(b, "\n    content: "...)
	b = appendScalar(b, f.Content)
	if f.Encoding != "" {
		b = append(b, "\n    encoding: "...)
		b = appendScalar(b, f.Encoding)
	}
	if f.Permissions != "" {
		b = append(b, "\n    permissions: "...)
		b = appendScalar(b, f.Permissions)
	}
	if f.Owner != "" {
		b = append(b, "\n    owner: "...)
		b = appendScalar(b, f.Owner)
	}
	if f.Defer {
		b = append(b, "\n    defer: true"...)
	}
	return append(b, '\n')
}

// inClass reports whether appendScalar writes s as go-yaml does: plain
// (plainString), or double-quoted ("" and digitString).
func inClass(s string) bool {
	return s == "" || plainString(s) || digitString(s)
}

// appendScalar appends s, which is in the class (inClass), as go-yaml
// writes a string value in a block mapping.
func appendScalar(b []byte, s string) []byte {
	if plainString(s) {
		return append(b, s...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
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
