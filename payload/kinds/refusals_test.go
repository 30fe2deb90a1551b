package kinds_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

// TestRefusalReports: jobs setting every field some kind refuses, for each
// format and guest OS, get the reports (fields, messages and their order)
// the three refusal tables gave before the field table replaced them
// (testdata/refusals/report.golden, written by the code at dfa5efb).
func TestRefusalReports(t *testing.T) {
	files, _ := filepath.Glob("testdata/refusals/*.json")
	var got strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, r := job.ParseWith(b, job.Defaults{})
		for _, e := range r.Errors {
			got.WriteString(filepath.Base(f) + "\t" + e.Field + "\t" + e.Message + "\n")
		}
	}
	want, err := os.ReadFile("testdata/refusals/report.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("reports differ from testdata/refusals/report.golden:\n%s", got.String())
	}
}
