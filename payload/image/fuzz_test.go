package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// fuzzHangLimit is a liveness guard, not a performance bound: an input that
// keeps Inspect or ReadFile busy this long is reported (with the input saved
// by the fuzzer) instead of stalling the fuzzer silently at 0 execs/sec.
const fuzzHangLimit = 60 * time.Second

// FuzzInspect feeds arbitrary bytes to Inspect and ReadFile: they must return
// (an error or an Info) and never panic or hang. Seeds: testdata/fuzz/FuzzInspect
// (images and damaged images) plus images built here.
//
// Run with -fuzzminimizetime=0 (or a few seconds): the seeds are images of
// 30-100 KiB, and minimizing each new input of that size under the default 60 s
// budget stalls the fuzzer at 0 execs/sec:
//
//	go test ./payload/image -run XXX -fuzz FuzzInspect -fuzzminimizetime 0 -fuzztime 500000x
//
// A count (Nx) rather than a duration avoids the Go coordinator race that ends
// duration-bounded runs with a bare "context deadline exceeded" and no crasher
// (golang/go#75804).
func FuzzInspect(f *testing.F) {
	dir := f.TempDir()
	for i, spec := range []Spec{
		{MediaISO, "cidata", cidataEntries()},
		{MediaVFAT, "cidata", cidataEntries()[:2]},
	} {
		p := filepath.Join(dir, fmt.Sprintf("seed%d", i))
		if _, err := Write(context.Background(), spec, p, Options{GID: -1}); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// One scratch file per process, rewritten for every input.
	p := filepath.Join(dir, "input.img")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- inspectAndRead(p) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(fuzzHangLimit):
			_ = os.WriteFile(filepath.Join(os.TempDir(), "vmpayload-fuzz-hang.img"), data, 0o600)
			panic(fmt.Sprintf("Inspect/ReadFile still running after %v on a %d-byte input", fuzzHangLimit, len(data)))
		}
	})
}

// inspectAndRead returns a description of any contract violation.
func inspectAndRead(p string) error {
	info, err := Inspect(p)
	if err != nil {
		if !errors.Is(err, ErrUnknownFormat) {
			return fmt.Errorf("Inspect error %v does not wrap ErrUnknownFormat", err)
		}
		return nil
	}
	if info.FSType != FSTypeISO9660 && info.FSType != FSTypeVFAT {
		return fmt.Errorf("Inspect accepted the file with FSType %q", info.FSType)
	}
	for _, fi := range info.Files {
		if b, err := ReadFile(p, fi.Path); err == nil && int64(len(b)) != fi.Size {
			return fmt.Errorf("ReadFile(%q) gave %d bytes, Inspect listed %d", fi.Path, len(b), fi.Size)
		}
	}
	return nil
}

// FuzzReadISO feeds arbitrary bytes to the ISO reader directly (Inspect
// recovers from panics, which would hide one here): it must return an
// error or a volume whose files all lie inside the input, and never panic.
//
// The seeds are both ISO layouts (the Joliet tree of ISOLayoutJolietTree
// and the go-diskfs layout), and the Joliet tree is read as well.
func FuzzReadISO(f *testing.F) {
	for _, spec := range []Spec{{MediaISO, "cidata", cidataEntries()}, {MediaISO, "config-2", config2Entries()}} {
		dirs, err := validateSpec(spec)
		if err != nil {
			f.Fatal(err)
		}
		for _, v := range []isoVariant{isoCurrent, isoJolietTree} {
			img, err := buildISO(context.Background(), spec, dirs, v)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(img)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := readISOBytes(data)
		if err != nil {
			return
		}
		files := v.files
		if j, err := v.jolietFiles(); err == nil {
			files = append(slices.Clone(files), j...)
		}
		for _, fi := range files {
			b, err := v.data(fi)
			if err != nil || len(b) != int(fi.size) {
				t.Fatalf("file %q listed with %d bytes: read %d, %v", fi.path, fi.size, len(b), err)
			}
		}
	})
}
