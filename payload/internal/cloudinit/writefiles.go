package cloudinit

import (
	"bytes"
)

// The write_files fast path (issue 14).
//
// go-yaml encodes a struct by reflection and analyses every scalar before
// choosing its style: ~10 µs per write_files entry here. fastYAML
// (fastyaml.go) writes whole documents without go-yaml, but gives up on a
// whole cloud-config for one value outside its class (a runcmd entry that
// is a list, a multi-line command). This path keeps the write_files
// entries, usually the bulk of a big config, out of go-yaml even then:
// entries whose strings are all one-line scalars of fastYAML's class
// (inClass: plain or double-quoted, scalarStyle) are written here, and
// the rest of the document is encoded around a one-entry write_files whose
// path is a placeholder made from the placeholder key (like the big
// contents' placeholders, see detachBigContents: no input can spell it);
// the placeholder entry, as the same code writes it, is then replaced by
// the entries. A config with any entry outside the class (multi-line
// text, a tab or a non-ASCII character in a path) is encoded whole by
// marshalYAML, as before. The differential tests (writefiles_test.go,
// FuzzWriteFilesYAML) hold the result to go-yaml's bytes.

// writeFilesPlaceholder starts the path of the placeholder entry.
const writeFilesPlaceholder = "vmpayload-write-files-"

// encodeCloudConfig encodes cc exactly as marshalYAML(cc) does. fast tells
// whether the write_files entries were written by appendWriteFile. key
// must be derived from everything cc can contain (the content hash is).
func encodeCloudConfig(cc *CloudConfig, key string) (doc []byte, fast bool, err error) {
	if len(cc.WriteFiles) == 0 || !fastYAMLOn {
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

// inClass reports whether appendScalar writes s as go-yaml does: on one
// line, plain or double-quoted (scalarStyle, fastyaml.go).
func inClass(s string) bool {
	st, ok := scalarStyle(s)
	return ok && st != styleLiteral
}

// appendScalar appends s, which is in the class (inClass), as go-yaml
// writes a string value in a block mapping.
func appendScalar(b []byte, s string) []byte {
	st, _ := scalarStyle(s)
	if st == styleQuoted {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	return append(b, s...)
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
