package job

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file is the one place that reads user-data and vendor-data the way
// cloud-init's user_data.convert_string and handlers.type_from_starts_with
// do: gzip is undone first, the text is MIME when "mime-version:" appears
// (in any case) within its first 4096 bytes, and otherwise its kind comes
// from how it starts (case-insensitively, after leading white space).

// UserDataKind classifies raw user-data as cloud-init does.
type UserDataKind string

// Kinds of user-data.
const (
	KindCloudConfig UserDataKind = "text/cloud-config"
	KindJSONP       UserDataKind = "text/cloud-config-jsonp"
	KindScript      UserDataKind = "text/x-shellscript"
	KindInclude     UserDataKind = "text/x-include-url"
	KindIncludeOnce UserDataKind = "text/x-include-once-url"
	KindBoothook    UserDataKind = "text/cloud-boothook"
	KindPartHandler UserDataKind = "text/part-handler"
	KindArchive     UserDataKind = "text/cloud-config-archive"
	KindJinja       UserDataKind = "text/jinja2"
	KindMultipart   UserDataKind = "multipart/mixed"
	KindUnknown     UserDataKind = ""
)

// startsWith maps cloud-init's content prefixes to kinds, longest first
// (cloud-init tries "#cloud-config-archive" before "#cloud-config").
var startsWith = []struct {
	prefix string
	kind   UserDataKind
}{
	{"#cloud-config-archive", KindArchive}, {"#cloud-config-jsonp", KindJSONP}, {"## template: jinja", KindJinja},
	{"#cloud-boothook", KindBoothook}, {"#include-once", KindIncludeOnce}, {"#cloud-config", KindCloudConfig},
	{"#part-handler", KindPartHandler}, {"#include", KindInclude}, {"#!", KindScript},
}

// mimeSniffBytes is how much of the (decompressed) text cloud-init looks
// at for "mime-version:".
const mimeSniffBytes = 4096

// IsMIME reports whether cloud-init reads s as a MIME message.
func IsMIME(s string) bool {
	if len(s) > mimeSniffBytes {
		s = s[:mimeSniffBytes]
	}
	return strings.Contains(strings.ToLower(s), "mime-version:")
}

// ClassifyUserData returns the kind cloud-init gives (decompressed)
// user-data s.
func ClassifyUserData(s string) UserDataKind {
	if IsMIME(s) {
		return KindMultipart
	}
	return kindFromStart(s)
}

// kindFromStart is cloud-init's type_from_starts_with.
func kindFromStart(s string) UserDataKind {
	head := s
	if len(head) > 64+mimeSniffBytes {
		head = head[:64+mimeSniffBytes]
	}
	head = strings.ToLower(strings.TrimLeft(head, " \t\r\n\v\f"))
	for _, p := range startsWith {
		if strings.HasPrefix(head, p.prefix) {
			return p.kind
		}
	}
	return KindUnknown
}

// IsGzip reports whether b starts with the gzip magic number.
func IsGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// ErrDecompressedTooLarge is returned by Gunzip for data that inflates
// beyond its limit (a decompression bomb, or just too much text).
var ErrDecompressedTooLarge = errors.New("decompresses to more than the limit")

// Gunzip returns the text cloud-init reads from b: b itself, or, for gzip
// data, its decompressed content (gzipped reports which). Decompression
// stops with ErrDecompressedTooLarge after limit bytes.
func Gunzip(b []byte, limit int) (text []byte, gzipped bool, err error) {
	if !IsGzip(b) {
		return b, false, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, true, fmt.Errorf("reading gzip data: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, true, fmt.Errorf("decompressing gzip data: %w", err)
	}
	if len(out) > limit {
		return nil, true, fmt.Errorf("gzip data %w of %d bytes", ErrDecompressedTooLarge, limit)
	}
	return out, true, nil
}

// Part is one MIME part (or a whole MIME message): headers and body.
type Part struct {
	// Header holds the part's MIME headers.
	Header textproto.MIMEHeader
	// Body is the part's body, still in its transfer encoding.
	Body []byte
}

// headerLineRE is the test Python's email parser applies to a line at the
// start of a message: a header ("Name:", the name printable ASCII but ':'),
// a continuation, or a unix From.
var headerLineRE = LazyRegexp(`^([\x21-\x39\x3b-\x7e]*:|[\t ])`)

// ParseMessage reads a MIME message as Python's email parser (which
// cloud-init uses) does: an optional leading mbox "From " line, then
// header lines until an empty line or the first line that is not a header.
func ParseMessage(doc string) (Part, error) {
	h := textproto.MIMEHeader{}
	rest := doc
	if strings.HasPrefix(rest, "From ") {
		_, rest, _ = strings.Cut(rest, "\n")
	}
	var name, value string
	flush := func() {
		if name != "" {
			h.Add(textproto.CanonicalMIMEHeaderKey(name), strings.TrimSpace(value))
		}
		name, value = "", ""
	}
	for rest != "" {
		line, after, _ := strings.Cut(rest, "\n") // after is "" without a line end
		l := strings.TrimRight(line, "\r")
		if l == "" {
			rest = after
			break
		}
		if !headerLineRE().MatchString(l) {
			break // Python: the rest is the body
		}
		if l[0] == ' ' || l[0] == '\t' {
			if name != "" {
				value += " " + strings.TrimSpace(l)
			}
		} else {
			flush()
			n, v, _ := strings.Cut(l, ":")
			name, value = n, v
		}
		rest = after
	}
	flush()
	return Part{Header: h, Body: []byte(rest)}, nil
}

// SplitMIME returns the parts cloud-init reads from MIME user-data doc: a
// multipart message's parts (nested multiparts stay one raw part each), or
// the message itself as a single part. It fails where cloud-init would
// find no part to use.
func SplitMIME(doc string) ([]Part, error) {
	msg, err := ParseMessage(doc)
	if err != nil {
		return nil, err
	}
	ct := msg.Header.Get("Content-Type")
	if ct == "" {
		return []Part{msg}, nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return nil, fmt.Errorf("reading the Content-Type %q: %w", ct, err)
	}
	if !strings.HasPrefix(mt, "multipart/") {
		return []Part{msg}, nil
	}
	if params["boundary"] == "" {
		return nil, fmt.Errorf("Content-Type %q is a multipart type without a boundary", mt)
	}
	mr := multipart.NewReader(bytes.NewReader(msg.Body), params["boundary"])
	var parts []Part
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading part %d: %w", len(parts)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("reading part %d: %w", len(parts)+1, err)
		}
		parts = append(parts, Part{Header: p.Header, Body: body})
	}
	if len(parts) == 0 {
		return nil, errors.New("it has no parts")
	}
	return parts, nil
}

// JoinMultipart writes parts as a MIME multipart/mixed document with the
// given boundary, which must not occur in any part.
func JoinMultipart(parts []Part, boundary string) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "Content-Type: multipart/mixed; boundary=%q\nMIME-Version: 1.0\n\n", boundary)
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		return nil, fmt.Errorf("setting the MIME boundary: %w", err)
	}
	for i, p := range parts {
		if bytes.Contains(p.Body, []byte(boundary)) {
			return nil, fmt.Errorf("writing MIME part %d: it contains the boundary %q", i+1, boundary)
		}
		pw, err := w.CreatePart(p.Header)
		if err != nil {
			return nil, fmt.Errorf("writing MIME part %d: %w", i+1, err)
		}
		if _, err := pw.Write(p.Body); err != nil {
			return nil, fmt.Errorf("writing MIME part %d: %w", i+1, err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("closing the MIME document: %w", err)
	}
	return buf.Bytes(), nil
}

// VendorDataRaw returns the job's vendor-data as given: vendor_data, or
// the bytes of vendor_data_base64 (which may be gzip data); "" for none or
// for base64 that does not decode (Validate reports it).
func (j *Job) VendorDataRaw() string {
	if j.VendorData != "" {
		return j.VendorData
	}
	b, err := base64.StdEncoding.DecodeString(j.VendorDataBase64)
	if err != nil {
		return ""
	}
	return string(b)
}

// CheckMergeableLists refuses #cloud-config user-data that gives a key the
// job generates as a list (users, write_files, runcmd) in another shape: a
// string, a mapping or null. cloud-init's list merger cannot join them, so
// one side would be dropped.
func CheckMergeableLists(j *Job, user string, r *Report) {
	if !generatesLists(j) {
		return
	}
	text, err := UserDataText(user)
	if err != nil || ClassifyUserData(text) != KindCloudConfig {
		return // Validate reports unreadable text; other types merge as parts
	}
	d, _, err := LoadYAMLMapping(text)
	if err != nil {
		return
	}
	checkMergeableNode(j, d, r)
}

// CheckReporterUserData refuses, for a job whose payload carries the guest
// reporter (guest_report true, with the agent's default applied) in
// user_data_mode replace, #cloud-config user-data user (raw, as given or
// read from its secret) that turns vendor-data off (vendor_data: {enabled:
// false}): the reporter travels in vendor-data then, and cloud-init would
// drop it.
func CheckReporterUserData(j *Job, user string, r *Report) {
	if j.GuestReport == nil || !*j.GuestReport || j.UserDataMode != ModeReplace || user == "" {
		return
	}
	text, err := UserDataText(user)
	if err != nil || ClassifyUserData(text) != KindCloudConfig {
		return
	}
	m, err := ParseYAMLMap(text)
	if err != nil {
		return
	}
	if vd, ok := m["vendor_data"].(map[string]any); ok && isFalse(vd["enabled"]) {
		r.Add("guest_report", CodeConflict, "with user_data_mode replace the guest reporter travels in vendor-data, which this user-data turns off (vendor_data: {enabled: false}); set guest_report to false, or use user_data_mode merge")
	}
}

// isFalse is cloud-init's util.is_false for a YAML value.
func isFalse(v any) bool {
	switch v := v.(type) {
	case bool:
		return !v
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "false", "0", "off", "no":
			return true
		}
	}
	return false
}

func generatesLists(j *Job) bool {
	return j.UserDataMode != ModeReplace && (len(j.Users) > 0 || len(j.Files) > 0 || len(j.Runcmd) > 0)
}

// checkMergeableNode is CheckMergeableLists on the parsed top mapping d of
// a #cloud-config (nil: nothing to check).
func checkMergeableNode(j *Job, d *yaml.Node, r *Report) {
	if d == nil || !generatesLists(j) {
		return
	}
	for _, k := range []struct {
		key, field string
		set        bool
	}{{"users", "users", len(j.Users) > 0}, {"write_files", "files", len(j.Files) > 0}, {"runcmd", "runcmd", len(j.Runcmd) > 0}} {
		if !k.set {
			continue
		}
		for i := 0; i+1 < len(d.Content); i += 2 {
			v := d.Content[i+1]
			for v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			if d.Content[i].Value == k.key && v.Kind != yaml.SequenceNode {
				r.Add("user_data", CodeConflict, "user_data gives %s as a %s, not a list, and the job's %s generate that list; cloud-init's merger would drop one of them (give %s as a list, or move the job's %s into user_data)",
					k.key, yamlKind(v), k.field, k.key, k.field)
			}
		}
	}
}

func yamlKind(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "mapping"
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		return "null"
	case n.Kind == yaml.ScalarNode:
		return "scalar"
	}
	return "node"
}
