package cloudinit

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
)

// PlainContentLimit is the size from which a write_files content is written
// base64-encoded (encoding: b64) instead of as YAML text (issue 14).
//
// go-yaml's emitter analyses every byte of a scalar: contents of this size or
// more therefore never pass through it. The cloud-config is rendered with a
// short placeholder in their place, and the base64 text, which needs no
// analysis, is put in its place afterwards as a double-quoted scalar
// (base64's alphabet needs no escaping there, and a quoted scalar is a
// string under every YAML schema). Measured (issue 33) on the benchmark's
// large job, 200 contents of 5000 bytes: go-yaml writes its cloud-config in
// ~45 ms with the base64 inline and in ~3 ms with the placeholders, a saving
// of ~14 % of a 300 ms VM start, which keeps this splice. Smaller contents —
// configuration files, scripts, motd — stay readable text in the image.
// cloud-init's write_files decodes b64 natively; the bytes written in the
// guest are the same either way.
const PlainContentLimit = 4096

// bigContents holds the contents taken out of a cloud-config by
// detachBigContents, to be put back by splice.
type bigContents struct {
	prefix   string       // every placeholder starts with it
	contents []bigContent // by placeholder number
}

// bigContent is one detached content: its text, and whether that is base64
// already (a job's own encoding: b64) or is encoded when spliced in.
type bigContent struct {
	text    string
	encoded bool
}

// spliceLen is the length of c's base64 text.
func (c bigContent) spliceLen() int {
	if c.encoded {
		return len(c.text)
	}
	return base64.StdEncoding.EncodedLen(len(c.text))
}

// placeholderDigits is the width of a placeholder's number: fixed, so that
// no placeholder is the prefix of another.
const placeholderDigits = 6

// detachBigContents replaces each write_files content of PlainContentLimit
// bytes or more (decoded) with a placeholder and sets its encoding to b64.
// key makes the placeholders unique: it must be one no input can spell
// (placeholderKey). It returns nil when no content is that large.
func detachBigContents(c *CloudConfig, key string) *bigContents {
	var bc *bigContents
	for i := range c.WriteFiles {
		wf := &c.WriteFiles[i]
		var c bigContent
		switch wf.Encoding {
		case "":
			if len(wf.Content) < PlainContentLimit {
				continue
			}
			c = bigContent{text: wf.Content}
		case "b64":
			// already base64 (checked by the job's validation, which decodes
			// it strictly: no line breaks, nothing to escape)
			if base64.StdEncoding.DecodedLen(len(wf.Content)) < PlainContentLimit || !isBase64Text(wf.Content) {
				continue
			}
			c = bigContent{text: wf.Content, encoded: true}
		default:
			continue
		}
		if bc == nil {
			bc = &bigContents{prefix: "vmpayload-content-" + key + "-"}
		}
		n := len(bc.contents)
		if n >= 1_000_000 {
			break // cannot happen within the job limits; keep the rest inline
		}
		bc.contents = append(bc.contents, c)
		wf.Content = fmt.Sprintf("%s%0*d", bc.prefix, placeholderDigits, n)
		wf.Encoding = "b64"
	}
	return bc
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
// The result is allocated once at its final size and every content is
// base64-encoded straight into its place.
func (bc *bigContents) splice(doc []byte) ([]byte, error) {
	if bc == nil {
		return doc, nil
	}
	type slot struct {
		at, n int // where a placeholder stood in doc, and its content number
	}
	var slots []slot
	seen := make([]bool, len(bc.contents))
	prefix := []byte(bc.prefix)
	size := len(doc)
	for off := 0; ; {
		i := bytes.Index(doc[off:], prefix)
		if i < 0 {
			break
		}
		i += off
		end := i + len(prefix) + placeholderDigits
		if end > len(doc) {
			return nil, fmt.Errorf("rendering write_files: a content placeholder was cut short")
		}
		n, err := strconv.Atoi(string(doc[i+len(prefix) : end]))
		if err != nil || n < 0 || n >= len(bc.contents) || seen[n] {
			return nil, fmt.Errorf("rendering write_files: content placeholder %q is not unique in the user-data", doc[i:end])
		}
		seen[n] = true
		slots = append(slots, slot{i, n})
		size += bc.contents[n].spliceLen() + 2 - (end - i)
		off = end
	}
	out := make([]byte, size)
	w, from := 0, 0
	for _, s := range slots {
		w += copy(out[w:], doc[from:s.at])
		c := bc.contents[s.n]
		out[w] = '"'
		dst := out[w+1 : w+1+c.spliceLen()]
		if c.encoded {
			copy(dst, c.text)
		} else {
			base64.StdEncoding.Encode(dst, []byte(c.text))
		}
		w += 1 + len(dst)
		out[w] = '"'
		w++
		from = s.at + len(prefix) + placeholderDigits
	}
	copy(out[w:], doc[from:])
	return out, nil
}
