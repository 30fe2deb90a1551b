package image

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// mountTmpfs mounts a tmpfs of the given size (mount options) on a fresh dir and
// unmounts it at cleanup. It fails the test when mounting is impossible.
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs -o %s (needs root and mount permission): %v\n%s", opts, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// onTmpfs is an outFn writing payload.img on a tmpfs mounted with opts.
func onTmpfs(opts string) func(t *testing.T) (string, string) {
	return func(t *testing.T) (string, string) {
		d := mountTmpfs(t, opts)
		return d, filepath.Join(d, "payload.img")
	}
}

func TestWriteErrorsLeaveNothing(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tooBig := []Entry{{"user-data", make([]byte, MaxContentBytes/2)}, {"meta-data", make([]byte, MaxContentBytes/2+1)}}

	cases := []struct {
		name  string
		ctx   context.Context
		spec  Spec
		outFn func(t *testing.T) (dir, out string) // where to write
		is    []error                              // errors.Is must hold for each
	}{
		{name: "unknown media", spec: Spec{"udf", "cidata", cidataEntries()}, is: []error{ErrInvalidSpec}},
		{name: "empty label", spec: Spec{MediaISO, "", cidataEntries()}, is: []error{ErrInvalidSpec}},
		{name: "iso label 33 chars", spec: Spec{MediaISO, strings.Repeat("a", 33), cidataEntries()}, is: []error{ErrInvalidSpec}},
		{name: "vfat label 12 chars", spec: Spec{MediaVFAT, "cidata-12345", cidataEntries()}, is: []error{ErrInvalidSpec}},
		{name: "vfat label bad char", spec: Spec{MediaVFAT, "ci.data", cidataEntries()}, is: []error{ErrInvalidSpec}},
		{name: "no entries", spec: Spec{MediaISO, "cidata", nil}, is: []error{ErrInvalidSpec}},
		{name: "empty path", spec: Spec{MediaISO, "cidata", []Entry{{"", nil}}}, is: []error{ErrInvalidSpec}},
		{name: "absolute path", spec: Spec{MediaISO, "cidata", []Entry{{"/meta-data", nil}}}, is: []error{ErrInvalidSpec}},
		{name: "dotdot path", spec: Spec{MediaISO, "cidata", []Entry{{"../meta-data", nil}}}, is: []error{ErrInvalidSpec}},
		{name: "inner dotdot", spec: Spec{MediaISO, "config-2", []Entry{{"openstack/../x", nil}}}, is: []error{ErrInvalidSpec}},
		{name: "trailing slash", spec: Spec{MediaISO, "config-2", []Entry{{"openstack/", nil}}}, is: []error{ErrInvalidSpec}},
		{name: "duplicate path", spec: Spec{MediaISO, "cidata", []Entry{{"meta-data", nil}, {"meta-data", nil}}}, is: []error{ErrInvalidSpec}},
		{name: "file and dir", spec: Spec{MediaISO, "config-2", []Entry{{"a", nil}, {"a/b", nil}}}, is: []error{ErrInvalidSpec}},
		{name: "too large", spec: Spec{MediaISO, "cidata", tooBig}, is: []error{ErrInvalidSpec, ErrTooLarge}},
		{name: "too large vfat", spec: Spec{MediaVFAT, "cidata", tooBig}, is: []error{ErrInvalidSpec, ErrTooLarge}},
		{name: "ctx cancelled", ctx: cancelled, spec: Spec{MediaISO, "cidata", cidataEntries()}, is: []error{context.Canceled}},
		{
			name: "out dir missing", spec: Spec{MediaISO, "cidata", cidataEntries()},
			outFn: func(t *testing.T) (string, string) {
				d := t.TempDir()
				return d, filepath.Join(d, "nope", "payload.img")
			},
			is: []error{fs.ErrNotExist},
		},
		{
			name: "out dir read-only", spec: Spec{MediaISO, "cidata", cidataEntries()},
			outFn: onTmpfs("size=1m,ro"),
			is:    []error{syscall.EROFS},
		},
		{
			name: "disk full iso", spec: Spec{MediaISO, "cidata", append(cidataEntries(), Entry{"big", bigData(256 << 10)})},
			outFn: onTmpfs("size=64k"),
			is:    []error{syscall.ENOSPC},
		},
		{
			name: "disk full vfat", spec: Spec{MediaVFAT, "cidata", cidataEntries()},
			outFn: onTmpfs("size=64k"),
			is:    []error{syscall.ENOSPC},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpdir := t.TempDir()
			t.Setenv("TMPDIR", tmpdir)
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			dir := t.TempDir()
			out := filepath.Join(dir, "payload.img")
			if tc.outFn != nil {
				dir, out = tc.outFn(t)
			}
			before := testenv.DirNames(t, dir)
			_, err := Write(ctx, tc.spec, out, Options{GID: -1})
			if err == nil {
				t.Fatal("Write succeeded, want error")
			}
			for _, target := range tc.is {
				if !errors.Is(err, target) {
					t.Errorf("error %q does not match %v", err, target)
				}
			}
			if got := testenv.DirNames(t, dir); !slices.Equal(got, before) {
				t.Errorf("output dir changed from %v to %v", before, got)
			}
			if got := testenv.DirNames(t, tmpdir); len(got) != 0 {
				t.Errorf("TMPDIR holds leftovers %v", got)
			}
		})
	}
}

// A failed Write must not touch an image already at out.
func TestWriteFailureKeepsExistingImage(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "payload.img")
	if _, err := Write(context.Background(), Spec{MediaISO, "cidata", cidataEntries()}, out, Options{GID: -1}); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, spec := range []Spec{
		{MediaISO, "cidata", []Entry{{"../x", nil}}},
		{MediaISO, "cidata", cidataEntries()[:1]},
	} {
		if _, err := Write(cancelled, spec, out, Options{GID: -1}); err == nil {
			t.Fatal("Write succeeded, want error")
		}
		now, err := os.ReadFile(out)
		if err != nil || !bytes.Equal(now, old) {
			t.Fatalf("existing image changed or vanished: %v", err)
		}
	}
}

func TestWriteModeOption(t *testing.T) {
	cases := []struct {
		mode, want os.FileMode
	}{{0, 0o640}, {0o600, 0o600}, {0o444, 0o444}}
	for _, tc := range cases {
		out := filepath.Join(t.TempDir(), "p.img")
		if _, err := Write(context.Background(), Spec{MediaVFAT, "cidata", cidataEntries()}, out, Options{Mode: tc.mode, GID: -1}); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != tc.want {
			t.Errorf("Mode %o: file mode %o, want %o", tc.mode, st.Mode().Perm(), tc.want)
		}
	}
}

// TestWriteRefusesNonRegularOutput: the atomic rename would replace
// whatever the output path is; a device node, directory, FIFO or symlink
// must be left alone (a build with -o /dev/null once replaced the host's
// /dev/null with an image file).
func TestWriteRefusesNonRegularOutput(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.img")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	mk := map[string]func(p string) error{
		"directory":     func(p string) error { return os.Mkdir(p, 0o700) },
		"named pipe":    func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"symbolic link": func(p string) error { return os.Symlink(target, p) },
	}
	if os.Geteuid() == 0 {
		// a character device with /dev/null's numbers, in the temp dir
		mk["character device"] = func(p string) error { return syscall.Mknod(p, syscall.S_IFCHR|0o600, 1<<8|3) }
	}
	for kind, make := range mk {
		t.Run(kind, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(kind, " ", "-"))
			if err := make(out); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Lstat(out)
			_, err := Write(context.Background(), Spec{MediaISO, "cidata", cidataEntries()}, out, Options{GID: -1})
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), kind) || !strings.Contains(err.Error(), out) {
				t.Fatalf("err = %v, want ErrInvalidSpec naming %q and the path", err, kind)
			}
			after, err := os.Lstat(out)
			if err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
				t.Fatalf("output %s changed: %v", out, err)
			}
			if b, _ := os.ReadFile(target); string(b) != "keep" {
				t.Fatalf("symlink target changed: %q", b)
			}
			if m, _ := filepath.Glob(filepath.Join(dir, tempPattern)); len(m) != 0 {
				t.Fatalf("temporary files left: %v", m)
			}
		})
	}
}

// fallbackEntries is a cidata tree with two groups of colliding short
// names that could take each other's renumbered names (go-diskfs built it
// in map order; the writer in walk order, see resolveCollisions).
func fallbackEntries() []Entry {
	return append(cidataEntries(), Entry{"abcdefgh1", nil}, Entry{"abcdefgh2", nil}, Entry{"abcdefg0", nil}, Entry{"abcdefg0x", nil})
}

// The ISO writer needs no workspace: a full TMPDIR does not matter and
// nothing is created there, whatever the spec (the go-diskfs workspace
// that specs with interacting short-name collisions once needed is gone).
func TestWriteISONeedsNoWorkspace(t *testing.T) {
	tmpdir := mountTmpfs(t, "size=4k")
	t.Setenv("TMPDIR", tmpdir)
	if err := os.WriteFile(filepath.Join(tmpdir, "fill"), make([]byte, 4096), 0o600); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	before := testenv.DirNames(t, tmpdir)
	for _, es := range [][]Entry{cidataEntries(), fallbackEntries()} {
		spec := Spec{MediaISO, "cidata", append(es, Entry{"big", bigData(256 << 10)})}
		out := filepath.Join(t.TempDir(), "payload.img")
		if _, err := Write(context.Background(), spec, out, Options{GID: -1}); err != nil {
			t.Fatalf("Write with a full TMPDIR: %v", err)
		}
		if got := testenv.DirNames(t, tmpdir); !slices.Equal(got, before) {
			t.Errorf("TMPDIR changed from %v to %v", before, got)
		}
	}
}
