package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestPrebuiltConfined: prebuilt_image is taken only as a regular file
// inside prebuilt_dirs, never through a symlink or ".." leading out, never a
// device or FIFO; the attached file is a copy in the payload directory with
// the checked bytes, and changing the original afterwards changes nothing.
func TestPrebuiltConfined(t *testing.T) {
	h := emptyNodeHost(t)
	ctx := context.Background()
	name := "vmpx-prebuilt"
	defineTestDomain(t, h, name)
	root := t.TempDir()
	seeds, outside := filepath.Join(root, "seeds"), filepath.Join(root, "outside")
	for _, d := range []string{seeds, outside, filepath.Join(seeds, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rd, err := payloadtest.Render(&job.Job{Version: 1, Domain: name, Hostname: "prebuilt"}, "", payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(seeds, "sub", "seed.iso")
	if _, err := rd.Write(ctx, good, payload.Options{GID: -1}); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret.iso")
	if _, err := rd.Write(ctx, secret, payload.Options{GID: -1}); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(secret, filepath.Join(seeds, "abs-link.iso")))
	must(os.Symlink("../outside/secret.iso", filepath.Join(seeds, "rel-link.iso")))
	must(os.Symlink("../outside", filepath.Join(seeds, "dirlink")))
	must(os.Symlink("sub/seed.iso", filepath.Join(seeds, "inside-link.iso")))
	must(os.Symlink("sub", filepath.Join(seeds, "subdir-link")))
	must(syscall.Mkfifo(filepath.Join(seeds, "fifo.iso"), 0o600))
	if os.Geteuid() == 0 {
		must(syscall.Mknod(filepath.Join(seeds, "null.iso"), syscall.S_IFCHR|0o600, 1<<8|3))
	}
	must(os.WriteFile(filepath.Join(seeds, "notiso.iso"), []byte("plain text"), 0o644))

	e := &Engine{Host: h, PayloadDir: t.TempDir(), ImageMode: 0o640, ImageGID: -1, PrebuiltDirs: []string{seeds},
		Log: quietLog()}
	tests := []struct {
		name, path string
		dirs       []string
		want       string // "" succeeds; else a part of the failure message
	}{
		{"regular file inside", good, nil, ""},
		{"through a symlinked directory that stays inside", filepath.Join(seeds, "subdir-link", "seed.iso"), nil, ""},
		{"outside every prebuilt dir", secret, nil, "not under a prebuilt directory"},
		{"absolute symlink out", filepath.Join(seeds, "abs-link.iso"), nil, "symlink"},
		{"relative symlink out", filepath.Join(seeds, "rel-link.iso"), nil, "symlink"},
		{"symlinked directory out", filepath.Join(seeds, "dirlink", "secret.iso"), nil, "outside prebuilt directory"},
		{"final symlink even inside", filepath.Join(seeds, "inside-link.iso"), nil, "symlink"},
		{"fifo", filepath.Join(seeds, "fifo.iso"), nil, "not a regular file"},
		{"device", filepath.Join(seeds, "null.iso"), nil, "not a regular file"},
		{"not an image", filepath.Join(seeds, "notiso.iso"), nil, "not a readable ISO9660 or vfat image"},
		{"the prebuilt dir itself", seeds, nil, "not under a prebuilt directory"},
		{"prebuilt_image disabled", good, []string{}, "no prebuilt_dirs configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "device" && os.Geteuid() != 0 {
				t.Skip("mknod needs root")
			}
			e.PrebuiltDirs = []string{seeds}
			if tt.dirs != nil {
				e.PrebuiltDirs = tt.dirs
			}
			r := runDoc(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","prebuilt_image":%q}`, name, tt.path), "t")
			if tt.want != "" {
				if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodePrebuiltImage ||
					r.Error.Field != "prebuilt_image" || !strings.Contains(r.Error.Message, tt.want) {
					t.Fatalf("result %s %+v; want prebuilt_image failure containing %q", r.State, r.Error, tt.want)
				}
				return
			}
			if r.State != result.StateDone {
				t.Fatalf("result %s %+v", r.State, r.Error)
			}
			if filepath.Dir(r.Payload.Path) != e.PayloadDir || !r.Payload.Prebuilt {
				t.Fatalf("attached %+v; want a copy in the payload directory", r.Payload)
			}
			if got := testenv.FileSHA256(t, r.Payload.Path); got != testenv.FileSHA256(t, good) || got != r.Payload.SHA256 {
				t.Errorf("copy sha256 %s, original %s, result %s", got, testenv.FileSHA256(t, good), r.Payload.SHA256)
			}
			d, err := h.Domain(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if pd, found, _ := domxml.FindPayload(d.InactiveXML); !found || pd.Path != r.Payload.Path {
				t.Errorf("drive holds %q; want the copy %q", pd.Path, r.Payload.Path)
			}
		})
	}
	// Rewriting the original after the job does not touch what is attached.
	e.PrebuiltDirs = []string{seeds}
	r := runDone(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","prebuilt_image":%q}`, name, good))
	before := testenv.FileSHA256(t, r.Payload.Path)
	must(os.WriteFile(good, []byte("swapped after the check"), 0o644))
	if testenv.FileSHA256(t, r.Payload.Path) != before {
		t.Error("the attached image changed with the original")
	}
}
