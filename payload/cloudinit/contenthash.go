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
// share their Files (the caller derives one from the other): each job is
// encoded with a short placeholder for every big file content, and the
// hashes are fed in step, each content JSON-encoded once (into a small
// reused buffer) and written to every hash where its placeholder stood. No
// job is encoded into one buffer holding megabytes (issue 14: the two
// whole-job encodings were 38 % of a large job's render). The result is the
// same as hashing json.Marshal(v) (TestJobHashesAreMarshalHashes).
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
	hashes := make([]hash.Hash, len(vs))
	for k, v := range vs {
		if light != nil {
			v.Files = light
		}
		doc, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("deriving the content hash: %w", err)
		}
		docs[k], hashes[k] = doc, sha256.New()
	}
	// the placeholders stand in every doc in the files' order
	var enc bytes.Buffer
	je := json.NewEncoder(&enc) // escapes as json.Marshal does
	for n, q := range placeholders {
		for k, doc := range docs {
			at := bytes.Index(doc, q)
			if at < 0 {
				return nil, fmt.Errorf("deriving the content hash: file content placeholder %d not found", n)
			}
			hashes[k].Write(doc[:at])
			docs[k] = doc[at+len(q):]
		}
		enc.Reset()
		if err := je.Encode(files[big[n]].Content); err != nil {
			return nil, fmt.Errorf("deriving the content hash: %w", err)
		}
		e := bytes.TrimSuffix(enc.Bytes(), []byte("\n")) // Encode ends a value with a newline
		for _, h := range hashes {
			h.Write(e)
		}
	}
	out := make([]string, len(vs))
	for k, h := range hashes {
		h.Write(docs[k])
		out[k] = hex.EncodeToString(h.Sum(nil))
	}
	return out, nil
}
