package cloudinit

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"strings"

	"github.com/vmpayload/vmpayload/payload/job"
)

// DeepMerge merges over into base and returns the result: maps merge
// recursively, lists append (base's items first), and any other value from
// over replaces base's. Neither input is modified.
func DeepMerge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, ov := range over {
		bv, ok := out[k]
		if !ok {
			out[k] = ov
			continue
		}
		switch b := bv.(type) {
		case map[string]any:
			if o, ok := ov.(map[string]any); ok {
				out[k] = DeepMerge(b, o)
				continue
			}
		case []any:
			if o, ok := ov.([]any); ok {
				l := make([]any, 0, len(b)+len(o))
				out[k] = append(append(l, b...), o...)
				continue
			}
		}
		out[k] = ov
	}
	return out
}

// Part is one part of a MIME multipart user-data document.
type Part struct {
	// Header holds the part's MIME headers, kept as given.
	Header textproto.MIMEHeader
	// Body is the part's body, still in its transfer encoding.
	Body []byte
}

// SplitMultipart returns the parts of a MIME multipart user-data document.
func SplitMultipart(doc string) ([]Part, error) {
	tp := textproto.NewReader(bufio.NewReader(strings.NewReader(doc)))
	hdr, err := tp.ReadMIMEHeader()
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading the MIME headers of user-data: %w", err)
	}
	mt, params, err := mime.ParseMediaType(hdr.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("reading the Content-Type of user-data: %w", err)
	}
	if !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		return nil, fmt.Errorf("user-data has Content-Type %q, not a multipart with a boundary", mt)
	}
	mr := multipart.NewReader(tp.R, params["boundary"])
	var parts []Part
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading part %d of multipart user-data: %w", len(parts)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("reading part %d of multipart user-data: %w", len(parts)+1, err)
		}
		parts = append(parts, Part{Header: p.Header, Body: body})
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("multipart user-data has no parts")
	}
	return parts, nil
}

// partFor wraps a single user-data document as a MIME part of its kind.
func partFor(doc, filename string) Part {
	kind := job.ClassifyUserData(doc)
	h := textproto.MIMEHeader{}
	h.Set("Content-Type", string(kind)+`; charset="utf-8"`)
	h.Set("MIME-Version", "1.0")
	h.Set("Content-Transfer-Encoding", "8bit")
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", filename))
	return Part{Header: h, Body: []byte(doc)}
}

// JoinMultipart writes parts as a MIME multipart/mixed document with the
// given boundary.
func JoinMultipart(parts []Part, boundary string) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "Content-Type: multipart/mixed; boundary=%q\nMIME-Version: 1.0\n\n", boundary)
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		return nil, fmt.Errorf("setting the MIME boundary: %w", err)
	}
	for i, p := range parts {
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
