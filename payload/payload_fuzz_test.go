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
// a document Parse accepts must render (secret references fail as
// *job.ValidationError since no secrets directory is set), and its image
// must write and read back.
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
		j, rep := job.Parse(data)
		if !rep.OK() || j.PrebuiltImage != "" {
			return
		}
		salt := func() (string, error) { return "fuzzsaltfuzzsalt", nil }
		r, err := Render(j, Options{Salt: salt})
		if err != nil {
			var ve *job.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("a valid job fails to render with a non-validation error: %v", err)
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
