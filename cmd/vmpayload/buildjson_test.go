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
