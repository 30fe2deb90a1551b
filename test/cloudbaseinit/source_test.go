// Package cloudbaseinit holds the tests of source.sh, which provides the
// cloudbase-init source that payload's Windows judge imports
// (read_payload.py; docs/windows.md).
package cloudbaseinit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vmpayload/vmpayload/test/testenv"
)

const (
	tarName = "cloudbase-init-c48d759.tar.gz"
	probe   = "cloudbaseinit/metadata/services/configdrive.py"
)

// source runs source.sh with env (and without the caller's
// VMPAYLOAD_CLOUDBASE_INIT, VMPAYLOAD_THIRD_PARTY and XDG_CACHE_HOME) and
// returns its output and error output.
func source(t *testing.T, env ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command("bash", "source.sh")
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "VMPAYLOAD_CLOUDBASE_INIT=") && !strings.HasPrefix(e, "VMPAYLOAD_THIRD_PARTY=") && !strings.HasPrefix(e, "XDG_CACHE_HOME=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return strings.TrimSpace(out.String()), errOut.String(), err
}

// TestSourceFailsWithoutSource: with neither a checkout nor the tarball,
// source.sh fails (make test's first step, so .ci/run stops) and says how
// to provide one; a wrong checkout or a tarball of another tree fails too.
func TestSourceFailsWithoutSource(t *testing.T) {
	empty := t.TempDir()
	cache := "XDG_CACHE_HOME=" + t.TempDir()
	other := t.TempDir()
	// a tarball with the right name that is not git archive of c48d759
	if out, err := exec.Command("tar", "-czf", filepath.Join(other, tarName), "-C", empty, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no tarball", []string{"VMPAYLOAD_THIRD_PARTY=" + empty, cache}, tarName + " is in none of: " + empty},
		{"another tree", []string{"VMPAYLOAD_THIRD_PARTY=" + other, cache}, "is not git archive of cloudbase-init commit c48d759"},
		{"not a checkout", []string{"VMPAYLOAD_CLOUDBASE_INIT=" + empty, cache}, "is not a cloudbase-init checkout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := source(t, tc.env...)
			if err == nil {
				t.Fatalf("source.sh succeeded (%q); want a failure", out)
			}
			if !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "set VMPAYLOAD_CLOUDBASE_INIT") {
				t.Errorf("source.sh's error %q does not say %q and how to provide the source", errOut, tc.want)
			}
		})
	}
}

// TestSourceUnpacksOnce: the pinned tarball is unpacked into the cache
// once; a second run reuses it, a stale or partial copy is unpacked again,
// and VMPAYLOAD_CLOUDBASE_INIT overrides the tarball.
func TestSourceUnpacksOnce(t *testing.T) {
	cache := t.TempDir()
	dir, errOut, err := source(t, "XDG_CACHE_HOME="+cache)
	if err != nil {
		testenv.MissingJudge(t, "cloudbase-init's source is not available here: %v: %s", err, errOut)
	}
	if want := filepath.Join(cache, "vmpayload", "cloudbase-init-c48d759"); dir != want {
		t.Fatalf("source.sh printed %q; want %q", dir, want)
	}
	if _, err := os.Stat(filepath.Join(dir, probe)); err != nil {
		t.Fatal(err)
	}
	stamp := filepath.Join(dir, ".vmpayload-source")
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(stamp)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	first := inode()
	again, _, err := source(t, "XDG_CACHE_HOME="+cache)
	if err != nil || again != dir || inode() != first {
		t.Errorf("second run: %q, %v, stamp inode %d (first %d); want the same directory, not unpacked again", again, err, inode(), first)
	}
	if err := os.WriteFile(stamp, []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, probe)); err != nil {
		t.Fatal(err)
	}
	if again, _, err := source(t, "XDG_CACHE_HOME="+cache); err != nil || again != dir {
		t.Fatalf("run over a stale copy: %q, %v", again, err)
	}
	if _, err := os.Stat(filepath.Join(dir, probe)); err != nil {
		t.Errorf("a stale copy was not unpacked again: %v", err)
	}
	if got, _, err := source(t, "VMPAYLOAD_CLOUDBASE_INIT="+dir, "VMPAYLOAD_THIRD_PARTY="+t.TempDir()); err != nil || got != dir {
		t.Errorf("with VMPAYLOAD_CLOUDBASE_INIT=%s: %q, %v; want that directory", dir, got, err)
	}
}
