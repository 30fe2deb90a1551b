package cloudinit

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"unicode/utf8"

	"github.com/vmpayload/vmpayload/payload/job"
)

// bigHashContent is the file content size from which jobHashes encodes a
// content apart instead of inside the whole job.
const bigHashContent = 1024

// jobHashes returns the hex SHA-256 of json.Marshal(v) for each v. The jobs
// must share their Files (the caller derives one from the other): each job
// is encoded with a short placeholder for every big file content, and the
// hashes are fed the jobs' texts with every content JSON-encoded (by
// appendJSONString, into a small reused buffer, once for all the jobs)
// where its placeholder stood. No job is encoded into one buffer holding
// megabytes (issue 14: the two whole-job encodings were 38 % of a large
// job's render), and no content is encoded twice. The result is the same
// as hashing json.Marshal(v) (TestJobHashesAreMarshalHashes). Render runs
// it on a goroutine of its own when the contents are big
// (startIdentities).
func jobHashes(vs ...job.Job) ([]string, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	files := vs[0].Files
	// a placeholder per big content: random, so no job text can hold it
	var nonce [16]byte
	var big []int             // indexes into files
	var placeholders [][]byte // the quoted placeholder of each
	var light []job.File
	for i, f := range files {
		if len(f.Content) < bigHashContent {
			continue
		}
		if light == nil {
			if _, err := rand.Read(nonce[:]); err != nil {
				return nil, fmt.Errorf("deriving the content hash: %w", err)
			}
			light = append([]job.File(nil), files...)
		}
		ph := fmt.Sprintf("vmpayload-hash-%x-%d", nonce, i)
		light[i].Content = ph
		big, placeholders = append(big, i), append(placeholders, []byte(`"`+ph+`"`))
	}
	docs := make([][]byte, len(vs))
	hs := make([]hash.Hash, len(vs))
	for k, v := range vs {
		if light != nil {
			v.Files = light
		}
		doc, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("deriving the content hash: %w", err)
		}
		docs[k], hs[k] = doc, sha256.New()
	}
	var e []byte
	for n, q := range placeholders {
		for k, doc := range docs {
			at := bytes.Index(doc, q)
			if at < 0 {
				return nil, fmt.Errorf("deriving the content hash: file content placeholder %d not found in job %d", n, k)
			}
			hs[k].Write(doc[:at])
			docs[k] = doc[at+len(q):]
		}
		e = appendJSONString(e[:0], files[big[n]].Content)
		for _, h := range hs {
			h.Write(e)
		}
	}
	out := make([]string, len(vs))
	for k, h := range hs {
		h.Write(docs[k])
		out[k] = hex.EncodeToString(h.Sum(nil))
	}
	return out, nil
}

// bigContentBytes is the total size of the contents in files that
// jobHashes encodes apart.
func bigContentBytes(files []job.File) int {
	n := 0
	for _, f := range files {
		if len(f.Content) >= bigHashContent {
			n += len(f.Content)
		}
	}
	return n
}

// parallelHashBytes is the total size of big file contents from which
// Render derives the hashes on a goroutine of its own: below it a
// goroutine's start and hand-over cost more than the work they share out.
const parallelHashBytes = 256 << 10

// appendJSONString appends s as encoding/json writes a string (json.Marshal:
// HTML-safe): quoted; '"' and '\\' and \b \f \n \r \t escaped by a
// backslash, other bytes below 0x20 and '<', '>', '&' as \u00XX, U+2028 and
// U+2029 as \u2028 and \u2029, each byte of invalid UTF-8 as \ufffd.
// encoding/json does this one byte at a time (~350 MB/s here); runs of
// bytes that need nothing are found eight at a time. TestAppendJSONString
// compares the two.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		i = jsonPlainRun(s, i)
		if i >= len(s) {
			break
		}
		if b := s[i]; b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // other control bytes, '<', '>', '&'
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// jsonPlainRun returns the index of the first byte at or after i that
// appendJSONString must look at (not printable ASCII, or one of " \\ < > &),
// or len(s).
func jsonPlainRun(s string, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	const quote, backslash, lt, gt, amp = ones * '"', ones * '\\', ones * '<', ones * '>', ones * '&'
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		// a high bit set: a byte that is non-ASCII, below 0x20, or equal
		// to one of the five
		a, b, c, d, e := x^quote, x^backslash, x^lt, x^gt, x^amp
		t := x | (x-ones*0x20)&^x | (a-ones)&^a | (b-ones)&^b | (c-ones)&^c | (d-ones)&^d | (e-ones)&^e
		if t&highs != 0 {
			break
		}
	}
	for i < len(s) {
		b := s[i]
		if b < 0x20 || b >= utf8.RuneSelf || b == '"' || b == '\\' || b == '<' || b == '>' || b == '&' {
			break
		}
		i++
	}
	return i
}
