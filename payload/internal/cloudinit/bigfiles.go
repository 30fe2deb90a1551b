package cloudinit

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"sync"
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

// encodeBase64To writes the standard base64 encoding of s into dst, which
// is exactly base64.StdEncoding.EncodedLen(len(s)) long, straight from the
// string. encoding/base64 looks up one character at a time and takes a
// []byte (a copy of s); this looks up two at a time in a 4096-entry table
// and turns six bytes into eight characters per step, ~1.7× the speed on a
// megabyte (TestEncodeBase64 compares it with encoding/base64).
func encodeBase64To(dst []byte, s string) {
	di, si := 0, 0
	// six bytes of s per step, read as one 64-bit word (two spare bytes)
	for ; len(s)-si >= 8 && len(dst)-di >= 8; si, di = si+6, di+8 {
		w := s[si : si+8]
		v := uint64(w[0])<<56 | uint64(w[1])<<48 | uint64(w[2])<<40 | uint64(w[3])<<32 |
			uint64(w[4])<<24 | uint64(w[5])<<16 | uint64(w[6])<<8 | uint64(w[7])
		x := uint64(base64Pairs[v>>52]) | uint64(base64Pairs[v>>40&0xfff])<<16 |
			uint64(base64Pairs[v>>28&0xfff])<<32 | uint64(base64Pairs[v>>16&0xfff])<<48
		d := dst[di : di+8]
		d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24), byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56)
	}
	for ; len(s)-si >= 3; si, di = si+3, di+4 {
		v := uint(s[si])<<16 | uint(s[si+1])<<8 | uint(s[si+2])
		p, q := base64Pairs[v>>12], base64Pairs[v&0xfff]
		d := dst[di : di+4]
		d[0], d[1], d[2], d[3] = byte(p), byte(p>>8), byte(q), byte(q>>8)
	}
	switch len(s) - si {
	case 1:
		v := uint(s[si])
		d := dst[di : di+4]
		d[0], d[1], d[2], d[3] = base64Alphabet[v>>2], base64Alphabet[v<<4&63], '=', '='
	case 2:
		v := uint(s[si])<<8 | uint(s[si+1])
		d := dst[di : di+4]
		d[0], d[1], d[2], d[3] = base64Alphabet[v>>10], base64Alphabet[v>>4&63], base64Alphabet[v<<2&63], '='
	}
}

// base64Alphabet is the standard base64 alphabet (RFC 4648 section 4).
const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// base64Pairs maps twelve bits to their two base64 characters (first in
// the low byte).
var base64Pairs = func() (t [4096]uint16) {
	for i := range t {
		t[i] = uint16(base64Alphabet[i>>6]) | uint16(base64Alphabet[i&63])<<8
	}
	return t
}()

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
//
// The result is allocated once at its final size and every content is
// base64-encoded straight into its place; with parallelEncodeBytes or more
// to encode, the contents are shared out between two goroutines (disjoint
// parts of the result), as base64 of a megabyte is ~1 ms here.
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
	type fill struct {
		dst []byte
		c   bigContent
	}
	fills := make([]fill, 0, len(slots))
	toEncode := 0
	w, from := 0, 0
	for _, s := range slots {
		w += copy(out[w:], doc[from:s.at])
		c := bc.contents[s.n]
		out[w] = '"'
		dst := out[w+1 : w+1+c.spliceLen()]
		if c.encoded {
			copy(dst, c.text)
		} else {
			fills = append(fills, fill{dst, c})
			toEncode += len(c.text)
		}
		w += 1 + len(dst)
		out[w] = '"'
		w++
		from = s.at + len(prefix) + placeholderDigits
	}
	copy(out[w:], doc[from:])
	encode := func(fs []fill) {
		for _, f := range fs {
			encodeBase64To(f.dst, f.c.text)
		}
	}
	if toEncode < parallelEncodeBytes {
		encode(fills)
		return out, nil
	}
	// split where half of the bytes to encode are behind
	half, k := 0, 0
	for k < len(fills) && half < toEncode/2 {
		half += len(fills[k].c.text)
		k++
	}
	var wg sync.WaitGroup
	wg.Go(func() { encode(fills[k:]) })
	encode(fills[:k])
	wg.Wait()
	return out, nil
}

// parallelEncodeBytes is the amount of content from which splice encodes
// on two goroutines.
const parallelEncodeBytes = 256 << 10
