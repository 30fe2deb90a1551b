package cloudinit

import (
	"encoding/base64"
	"fmt"
	"net/textproto"
	"strings"

	"github.com/vmpayload/vmpayload/payload/job"
)

// MergeType is the Merge-Type header of every generated cloud-config part
// in merge mode. The user's user-data comes first, as it is, and each
// generated part is merged into what cloud-init made of it with cloud-init's
// own mergers: mappings merged key by key (dict(no_replace)) so a value
// the user gave stays, lists of both sides joined with the generated items
// first (recurse_list + list(prepend)), and a string the user gave kept
// (str() is only reached under recurse_str, which is off). The user's text
// is never re-emitted, so YAML 1.1 scalars (yes, 0644, 1_000, !!binary),
// duplicate keys and every other detail keep the meaning PyYAML gives
// them in the guest.
const MergeType = "dict(no_replace,recurse_list)+list(prepend)+str()"

// partFor wraps a single (non-MIME) user-data document as a MIME part of
// the kind cloud-init would give it.
func partFor(doc, filename string) job.Part {
	kind := job.ClassifyUserData(doc)
	h := textproto.MIMEHeader{}
	if kind != job.KindUnknown && kind != job.KindMultipart {
		h.Set("Content-Type", string(kind)+`; charset="utf-8"`)
	} else {
		h.Set("Content-Type", `text/plain; charset="utf-8"`)
	}
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", filename))
	if isASCII(doc) {
		h.Set("Content-Transfer-Encoding", "7bit")
		return job.Part{Header: h, Body: []byte(doc)}
	}
	// cloud-init parses the multipart from a Python str, and Python's email
	// package turns an 8bit part back into bytes with raw-unicode-escape:
	// "ü" would reach the guest as the single byte 0xfc (not UTF-8) and the
	// part would fail to load. A base64 part decodes to the exact bytes.
	h.Set("Content-Transfer-Encoding", "base64")
	return job.Part{Header: h, Body: base64Lines([]byte(doc))}
}

// isASCII reports whether s holds only 7-bit bytes.
func isASCII(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r >= 0x80 })
}

// base64Lines is b in standard base64, in lines of 76 characters each ended
// by a newline (RFC 2045's limit).
func base64Lines(b []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(b)
	out := make([]byte, 0, len(enc)+len(enc)/76+1)
	for len(enc) > 76 {
		out = append(out, enc[:76]...)
		out = append(out, '\n')
		enc = enc[76:]
	}
	out = append(out, enc...)
	return append(out, '\n')
}

// generatedPart wraps a generated cloud-config document as a part that
// merges under MergeType.
func generatedPart(doc []byte, filename string) job.Part {
	p := partFor(string(doc), filename)
	p.Header.Set("Merge-Type", MergeType)
	return p
}

// userPart is the user's (decompressed) user-data as one MIME part: a MIME
// document keeps its own headers and body (a multipart nests, and
// cloud-init walks nested multiparts), anything else is wrapped as the
// kind it starts as.
func userPart(text string) (job.Part, error) {
	if job.ClassifyUserData(text) != job.KindMultipart {
		return partFor(text, "user-data"), nil
	}
	if _, err := job.SplitMIME(text); err != nil {
		return job.Part{}, err
	}
	return job.ParseMessage(text)
}

// mergeUserData returns the user-data of merge mode: the user's text first,
// then the generated cloud-config parts, in a multipart/mixed document.
// More generated parts (from later features) go after gen, each with the
// MergeType header.
func mergeUserData(text string, boundary string, gen ...job.Part) ([]byte, error) {
	up, err := userPart(text)
	if err != nil {
		return nil, fmt.Errorf("merging user_data: %w", err)
	}
	return job.JoinMultipart(append([]job.Part{up}, gen...), boundary)
}
