package payload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

// FuzzRenderJob takes job documents through the whole offline pipeline:
// a document Check passes (secret references fail there, since no secrets
// directory is set) must render, refused at most for the size of its
// documents, and its image must write and read back.
func FuzzRenderJob(f *testing.F) {
	files, _ := filepath.Glob("../configs/examples/*.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"version":1,"hostname":"h","user_data":"#cloud-config\na: 1\n","format":"configdrive"}`))
	f.Add([]byte(`{"version":1,"media":"vfat","files":[{"path":"/etc/x","content":"eA==","encoding":"base64"}]}`))
	out := filepath.Join(f.TempDir(), "seed.img")
	f.Fuzz(func(t *testing.T, data []byte) {
		j, c, rep := Check(data, CheckOptions{Secrets: true, Build: true})
		if !rep.OK() || j.PrebuiltImage != "" {
			return
		}
		if c == nil {
			t.Fatal("a job that passed the check has no checked job to render")
		}
		salt := func() (string, error) { return "fuzzsaltfuzzsalt", nil }
		r, err := Render(c, Options{Salt: salt})
		if err != nil {
			var ve *job.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("a checked job fails to render with a non-validation error: %v", err)
			}
			for _, e := range ve.Errors {
				if e.Field != "" {
					t.Fatalf("the renderer refused a checked job for a field the check passed: %v", err)
				}
			}
			return
		}
		res, err := r.Write(context.Background(), out, Options{GID: -1})
		if err != nil {
			t.Fatalf("a rendered job does not write: %v", err)
		}
		if res.Label != Label(r.Job.Format) {
			t.Fatalf("label %q", res.Label)
		}
		if _, err := r.Reuse(out); err != nil {
			t.Fatalf("written image is not reusable: %v", err)
		}
	})
}
