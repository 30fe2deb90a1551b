package cloudinit

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"

	"github.com/vmpayload/vmpayload/payload/job"
)

// bigHashContent is the file content size from which jobHashes encodes a
// content apart instead of inside the whole job.
const bigHashContent = 1024

// jobHashes returns the hex SHA-256 of json.Marshal(v) for each v. The jobs
// share their Files (the caller derives one from the other), so big file
// contents are JSON-encoded once and fed to every hash, and no job is
// encoded into one buffer holding megabytes (issue 14: the two encodings
// were 38 % of a large job's render). The result is the same as hashing
// json.Marshal(v) (TestJobHashesAreMarshalHashes).
func jobHashes(vs ...job.Job) ([]string, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	files := vs[0].Files
	// a placeholder per big content: random, so no job text can hold it
	var nonce [16]byte
	var big []int             // indexes into files
	var encoded [][]byte      // json.Marshal of each big content
	var placeholders []string // the placeholder of each, unquoted
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
		e, err := json.Marshal(f.Content)
		if err != nil {
			return nil, fmt.Errorf("deriving the content hash: %w", err)
		}
		ph := fmt.Sprintf("vmpayload-hash-%x-%d", nonce, i)
		light[i].Content = ph
		big, encoded, placeholders = append(big, i), append(encoded, e), append(placeholders, ph)
	}
	out := make([]string, len(vs))
	for k, v := range vs {
		if light != nil {
			v.Files = light
		}
		doc, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("deriving the content hash: %w", err)
		}
		h := sha256.New()
		if err := writeSpliced(h, doc, placeholders, encoded); err != nil {
			return nil, err
		}
		out[k] = hex.EncodeToString(h.Sum(nil))
	}
	return out, nil
}

// writeSpliced writes doc into h with each quoted placeholder replaced by
// its encoded content. The placeholders appear in doc in their order (the
// files' order); being random, nowhere else.
func writeSpliced(h hash.Hash, doc []byte, placeholders []string, encoded [][]byte) error {
	for n, ph := range placeholders {
		q := `"` + ph + `"`
		at := bytes.Index(doc, []byte(q))
		if at < 0 {
			return fmt.Errorf("deriving the content hash: file content placeholder %d not found", n)
		}
		h.Write(doc[:at])
		h.Write(encoded[n])
		doc = doc[at+len(q):]
	}
	h.Write(doc)
	return nil
}
