package payload_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
)

// FuzzRenderJob takes job documents through the whole offline pipeline:
// a document Check passes (secret references fail there, since no secrets
// directory is set) must render, refused at most for the size of its
// documents, and its image must write and read back.
func FuzzRenderJob(f *testing.F) {
	files, _ := filepath.Glob("../configs/examples/*.json")
	win, _ := filepath.Glob("../configs/examples/windows/*.json") // guest_os "windows" and format "sysprep"
	files = append(files, win...)
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"version":1,"hostname":"h","user_data":"#cloud-config\na: 1\n","format":"configdrive"}`))
	f.Add([]byte(`{"version":1,"media":"vfat","files":[{"path":"/etc/x","content":"eA==","encoding":"base64"}]}`))
	f.Add([]byte(`{"version":1,"format":"sysprep","hostname":"w1","timezone":"UTC","sysprep":"<unattend xmlns="urn:schemas-microsoft-com:unattend"><a n="{{hostname}}">{{timezone}}</a></unattend>"}`))
	f.Add([]byte(`{"version":1,"format":"sysprep","sysprep_medium":"cdrom","sysprep_file_name":"Autounattend.xml","sysprep":"<unattend xmlns="urn:schemas-microsoft-com:unattend"/>"}`))
	out := filepath.Join(f.TempDir(), "seed.img")
	f.Fuzz(func(t *testing.T, data []byte) {
		j, c, rep := payload.Check(data, payload.CheckOptions{Secrets: true, Build: true})
		if !rep.OK() || j.PrebuiltImage != "" {
			return
		}
		if c == nil {
			t.Fatal("a job that passed the check has no checked job to render")
		}
		r := payloadtest.FuzzRender(t, c)
		if r == nil {
			return
		}
		res, err := r.Write(context.Background(), out, payload.Options{GID: -1})
		if err != nil {
			t.Fatalf("a rendered job does not write: %v", err)
		}
		if res.Label != payload.Label(r.Job.Format) {
			t.Fatalf("label %q", res.Label)
		}
		if _, err := r.Reuse(out); err != nil {
			t.Fatalf("written image is not reusable: %v", err)
		}
	})
}
