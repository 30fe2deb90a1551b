package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/test/golden"
)

// TestBuildJSONGolden pins `vmpayload build --json` byte for byte (the
// output path is replaced by a placeholder): scripts read it.
func TestBuildJSONGolden(t *testing.T) {
	cases := []struct{ name, job, out string }{
		{"nocloud-iso", "../../configs/examples/02-full-nocloud.json", "seed.iso"},
		{"configdrive-iso", "../../configs/examples/03-full-configdrive.json", "seed.iso"},
		{"secrets", "../../configs/examples/11-secrets.json", "seed.iso"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			code, stdout, stderr := runCLI(t, "build", "--json", "--secrets-dir", "../../configs/examples/secrets", "-o", filepath.Join(dir, c.out), c.job)
			if code != 0 {
				t.Fatalf("build: exit %d %s", code, stderr)
			}
			got := strings.ReplaceAll(stdout, dir, "$DIR")
			golden.Compare(t, filepath.Join("testdata", "build", c.name+".json"), []byte(got), *update)
		})
	}
}

// TestBuildSysprepMediumNotice: `vmpayload build` of a sysprep job without
// a medium builds today's default, a floppy, and says so (stderr, so that
// --json stays a document); with sysprep_medium given it says nothing.
func TestBuildSysprepMediumNotice(t *testing.T) {
	for _, c := range []struct {
		job, media string
		notice     bool
	}{
		{"../../configs/examples/windows/sysprep-floppy.json", "vfat", true},
		{"../../configs/examples/windows/sysprep-cdrom.json", "iso", false},
	} {
		dir := t.TempDir()
		code, stdout, stderr := runCLI(t, "build", "--json", "--secrets-dir", "../../configs/examples/secrets", "-o", filepath.Join(dir, "answer.img"), c.job)
		if code != 0 {
			t.Fatalf("build %s: exit %d %s", c.job, code, stderr)
		}
		if !strings.Contains(stdout, `"media": "`+c.media+`"`) && !strings.Contains(stdout, `"media":"`+c.media+`"`) {
			t.Errorf("build %s: media is not %s: %s", c.job, c.media, stdout)
		}
		if got := strings.Contains(stderr, "sysprep_medium not given: building a floppy, the default without a domain"); got != c.notice {
			t.Errorf("build %s: notice %v, want %v; stderr %q", c.job, got, c.notice, stderr)
		}
	}
}
