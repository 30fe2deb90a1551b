// Package jobtest holds the job set-up that tests of several packages
// share. It imports only package job, so the tests of the kind packages
// (which package payload, and so payloadtest, imports) may use it. Only
// tests import it.
package jobtest

import (
	"encoding/json"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

// Applied parses the job document doc as an agent with no defaults would
// (job.ParseWith) and returns the job with them applied; it fails tb when
// the document has a problem.
func Applied(tb testing.TB, doc []byte) *job.Job {
	tb.Helper()
	j, r := job.ParseWith(doc, job.Defaults{})
	if !r.OK() {
		tb.Fatalf("job %s: %v", doc, r.Err())
	}
	a := j.Apply(job.Defaults{})
	return &a
}

// Decoded returns the job doc decodes to (job.Parse, as a command reads a
// job file): doc is the document's bytes, or a value json.Marshal makes
// them of; it fails tb when the document does not decode.
func Decoded(tb testing.TB, doc any) *job.Job {
	tb.Helper()
	data, ok := doc.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(doc); err != nil {
			tb.Fatal(err)
		}
	}
	j, rep := job.Parse(data)
	if err := rep.Err(); err != nil {
		tb.Fatalf("job %s: %v", data, err)
	}
	return j
}
