package payloadtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

// Example is an example job of configs/examples, named by its file name
// without ".json".
type Example struct {
	Name string
	Job  *job.Job
}

// BuildableExamples decodes every example job in dir (configs/examples,
// relative to the calling test's package) that produces an image: attaching
// a prebuilt image and detaching do not. It fails t when dir holds fewer
// than 10 jobs or one does not decode.
func BuildableExamples(t testing.TB, dir string) []Example {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("want at least 10 example jobs in %s, found %d (%v)", dir, len(paths), err)
	}
	var out []Example
	for _, p := range paths {
		ex := decodeExample(t, p)
		if ex.Job.PrebuiltImage != "" || ex.Job.Action == job.ActionDetach {
			continue
		}
		out = append(out, ex)
	}
	return out
}

// SysprepExamples decodes the sysprep example jobs (sysprep*.json) in dir
// (configs/examples/windows, relative to the calling test's package), by
// name. It fails t when dir holds fewer than 3 or one does not decode.
func SysprepExamples(t testing.TB, dir string) map[string]*job.Job {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "sysprep*.json"))
	if len(paths) < 3 {
		t.Fatalf("want the sysprep example jobs in %s, found %d", dir, len(paths))
	}
	out := map[string]*job.Job{}
	for _, p := range paths {
		ex := decodeExample(t, p)
		out[ex.Name] = ex.Job
	}
	return out
}

// SysprepSecrets returns a new secrets directory for the sysprep examples
// with the answer file (sysprep-unattend) of from and password as
// sysprep-admin-password: their jobs with another password.
func SysprepSecrets(t testing.TB, from, password string) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(from, "sysprep-unattend"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sysprep-unattend"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sysprep-admin-password"), []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// decodeExample reads and decodes the example job at p.
func decodeExample(t testing.TB, p string) Example {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	j, rep := job.Parse(data)
	if err := rep.Err(); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return Example{strings.TrimSuffix(filepath.Base(p), ".json"), j}
}
