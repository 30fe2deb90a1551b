package cloudinit

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// PlainContentLimit is the size from which a write_files content is written
// base64-encoded (encoding: b64) instead of as YAML text (issue 14).
//
// go-yaml's emitter analyses every byte of a scalar (~20 ns per byte here);
// for a job with a megabyte of file content that was most of the build.
// Contents of this size or more therefore never pass through the emitter: the
// cloud-config is rendered with a short placeholder in their place, and the
// base64 text, which needs no analysis, is put in its place afterwards as a
// double-quoted scalar (base64's alphabet needs no escaping there, and a
// quoted scalar is a string under every YAML schema). Smaller contents —
// configuration files, scripts, motd — stay readable text in the image.
// cloud-init's write_files decodes b64 natively; the bytes written in the
// guest are the same either way.
const PlainContentLimit = 4096

// bigContents holds the contents taken out of a cloud-config by
// detachBigContents, to be put back by splice.
type bigContents struct {
	prefix  string   // every placeholder starts with it
	encoded []string // base64 text by placeholder number
}

// placeholderDigits is the width of a placeholder's number: fixed, so that
// no placeholder is the prefix of another.
const placeholderDigits = 6

// detachBigContents replaces each write_files content of PlainContentLimit
// bytes or more (decoded) with a placeholder and sets its encoding to b64.
// key makes the placeholders unique: it must be derived from everything the
// user-data can contain (the content hash is), so that no input can spell a
// placeholder. It returns nil when no content is that large.
func detachBigContents(c *CloudConfig, key string) *bigContents {
	var bc *bigContents
	for i := range c.WriteFiles {
		wf := &c.WriteFiles[i]
		var enc string
		switch wf.Encoding {
		case "":
			if len(wf.Content) < PlainContentLimit {
				continue
			}
			enc = encodeBase64(wf.Content)
		case "b64":
			// already base64 (checked by the job's validation, which decodes
			// it strictly: no line breaks, nothing to escape)
			if base64.StdEncoding.DecodedLen(len(wf.Content)) < PlainContentLimit || !isBase64Text(wf.Content) {
				continue
			}
			enc = wf.Content
		default:
			continue
		}
		if bc == nil {
			bc = &bigContents{prefix: "vmpayload-content-" + key + "-"}
		}
		n := len(bc.encoded)
		if n >= 1_000_000 {
			break // cannot happen within the job limits; keep the rest inline
		}
		bc.encoded = append(bc.encoded, enc)
		wf.Content = fmt.Sprintf("%s%0*d", bc.prefix, placeholderDigits, n)
		wf.Encoding = "b64"
	}
	return bc
}

// encodeBase64 is base64.StdEncoding.EncodeToString without its two
// megabyte-sized copies of a big content (the string as []byte, the result
// as string): it encodes through small buffers into the one allocation of
// the result.
func encodeBase64(s string) string {
	const chunk = 3 * 1024 // a multiple of 3: padding only at the end
	var src [chunk]byte
	var dst [chunk / 3 * 4]byte
	var b strings.Builder
	b.Grow(base64.StdEncoding.EncodedLen(len(s)))
	for len(s) > 0 {
		n := copy(src[:], s)
		s = s[n:]
		m := base64.StdEncoding.EncodedLen(n)
		base64.StdEncoding.Encode(dst[:m], src[:n])
		b.Write(dst[:m])
	}
	return b.String()
}

// isBase64Text reports whether s consists of standard base64 characters
// only (so it can stand in a double-quoted scalar as it is).
func isBase64Text(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// splice puts the detached contents back into the rendered user-data: each
// placeholder becomes its base64 text in double quotes. A placeholder may be
// missing (a user_data merge can drop a generated write_files entry); one
// found twice is an error, as it would mean the placeholder was not unique.
func (bc *bigContents) splice(doc []byte) ([]byte, error) {
	if bc == nil {
		return doc, nil
	}
	size := len(doc)
	for _, e := range bc.encoded {
		size += len(e) + 2
	}
	out := make([]byte, 0, size)
	seen := make([]bool, len(bc.encoded))
	prefix := []byte(bc.prefix)
	rest := doc
	for {
		i := bytes.Index(rest, prefix)
		if i < 0 {
			break
		}
		end := i + len(prefix) + placeholderDigits
		if end > len(rest) {
			return nil, fmt.Errorf("rendering write_files: a content placeholder was cut short")
		}
		n, err := strconv.Atoi(string(rest[i+len(prefix) : end]))
		if err != nil || n < 0 || n >= len(bc.encoded) || seen[n] {
			return nil, fmt.Errorf("rendering write_files: content placeholder %q is not unique in the user-data", rest[i:end])
		}
		seen[n] = true
		out = append(out, rest[:i]...)
		out = append(out, '"')
		out = append(out, bc.encoded[n]...)
		out = append(out, '"')
		rest = rest[end:]
	}
	return append(out, rest...), nil
}
