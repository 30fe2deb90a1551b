// Package secrets reads named secrets from the agent's secrets directory.
// A name is a single file name in that directory: no "/", no "..", no dot
// files, and the file itself must be a regular file, not a symlink, so a job
// can never make the agent read something outside the directory.
package secrets

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/vmpayload/vmpayload/payload/job"
)

// MaxSecretBytes is the largest secret read.
const MaxSecretBytes = 1 << 20

// Errors a caller can tell apart with errors.Is.
var (
	ErrNoDir = errors.New("no secrets directory is configured")
	// ErrDirUnreadable: the secrets directory is missing or cannot be
	// opened (the wrapped error says why).
	ErrDirUnreadable = errors.New("the secrets directory cannot be opened")
	ErrInvalidName   = errors.New("invalid secret name")
	ErrNotFound      = errors.New("secret not found")
	ErrNotRegular    = errors.New("secret is not a regular file")
	ErrTooLarge      = errors.New("secret too large")
)

// Dir is a secrets directory.
type Dir string

// Read returns the content of the secret called name. Errors never include
// the secret's content.
func (d Dir) Read(name string) ([]byte, error) {
	if d == "" {
		return nil, fmt.Errorf("reading secret %q: %w", name, ErrNoDir)
	}
	if !job.ValidSecretName(name) {
		return nil, fmt.Errorf("reading secret %q: %w", name, ErrInvalidName)
	}
	dfd, err := unix.Open(string(d), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening secrets directory %s: %w: %w", d, ErrDirUnreadable, err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, fmt.Errorf("reading secret %q in %s: %w", name, d, ErrNotFound)
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("reading secret %q in %s: it is a symlink: %w", name, d, ErrNotRegular)
	case err != nil:
		return nil, fmt.Errorf("reading secret %q in %s: %w", name, d, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading secret %q: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("reading secret %q in %s: %w", name, d, ErrNotRegular)
	}
	if st.Size() > MaxSecretBytes {
		return nil, fmt.Errorf("reading secret %q: %d bytes: %w (limit %d)", name, st.Size(), ErrTooLarge, MaxSecretBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading secret %q: %w", name, err)
	}
	if len(b) > MaxSecretBytes {
		return nil, fmt.Errorf("reading secret %q: %w (limit %d)", name, ErrTooLarge, MaxSecretBytes)
	}
	return b, nil
}
