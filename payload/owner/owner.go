// Package owner records which host last built or used each payload image,
// so that hosts sharing one payload directory (NFS, a cluster file system)
// never delete an image another host's domain names.
//
// A live migration moves a domain, and the image its recipe names, from one
// host to another. With a payload directory on shared storage both hosts see
// the same file; the source host's agent then sees the domain leave (stopped
// after migration, undefined with --undefinesource, or absent from its next
// start-up listing) and would remove the image under the destination's
// running domain. The marker prevents that: whoever builds an image, reuses
// it for a job, or makes sure of it before a domain starts or arrives (the
// libvirt hook at "prepare begin", "migrate begin", "restore begin") claims
// it, and an agent removes only images it owns. See docs/durability.md.
//
// The marker of PAYLOAD_DIR/NAME is the file PAYLOAD_DIR/.owners/NAME holding
// the owner's host id and a newline, written atomically. A host's id is its
// /etc/machine-id (systemd's; distinct on every installed host, as libvirt
// needs distinct host UUIDs to migrate), else its host name. An image without
// a marker (written before markers existed) may be removed by any host, as
// before.
package owner

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is the name of the directory of markers inside a payload directory.
// It starts with a dot: the agent's orphan collection skips directories and
// a recipe never names a hidden file.
const Dir = ".owners"

// MachineIDFile is where HostID reads the host's id first.
var MachineIDFile = "/etc/machine-id"

// maxID bounds a marker's content; machine ids are 32 characters.
const maxID = 255

// HostID returns this host's id: the content of MachineIDFile, else the
// host name, else "" (no identity: ownership is not recorded and every
// image may be removed, as before markers existed).
func HostID() string {
	if b, err := os.ReadFile(MachineIDFile); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" && len(id) <= maxID && !strings.ContainsAny(id, "\n\r") {
			return id
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return ""
}

// Path returns the marker file of image.
func Path(image string) string {
	return filepath.Join(filepath.Dir(image), Dir, filepath.Base(image))
}

// markerDir opens the marker directory of image without following a
// symlink at the payload directory's last component or at .owners (a
// symlinked .owners is refused, never followed: the hook runs as root and
// writes there). With create, a missing .owners is made (mode 0700); without
// it, a missing one is (-1, nil).
func markerDir(image string, create bool) (int, error) {
	pd, err := unix.Open(filepath.Dir(image), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, refusedDir(filepath.Dir(image), err)
	}
	defer unix.Close(pd)
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(pd, Dir, flags, 0)
	if errors.Is(err, unix.ENOENT) {
		if !create {
			return -1, nil
		}
		if err := unix.Mkdirat(pd, Dir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, err
		}
		fd, err = unix.Openat(pd, Dir, flags, 0)
	}
	if err != nil {
		return -1, refusedDir(filepath.Join(filepath.Dir(image), Dir), err)
	}
	return fd, nil
}

// refusedDir names why a directory was not opened: a symlink (ELOOP with
// O_NOFOLLOW, or ENOTDIR for a symlink to a file) is refused.
func refusedDir(dir string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symlink; refused (owner markers are never written through a symlink)", dir)
		}
		return fmt.Errorf("%s is not a directory", dir)
	}
	return fmt.Errorf("opening %s: %w", dir, err)
}

// Of returns the host id recorded for image, and "" with a nil error when
// the image has no marker. A marker that is a symlink or not a regular
// file is an error (it is not followed or read).
func Of(image string) (string, error) {
	dfd, err := markerDir(image, false)
	if err != nil {
		return "", fmt.Errorf("reading the owner of %s: %w", image, err)
	}
	if dfd < 0 {
		return "", nil
	}
	defer unix.Close(dfd)
	return readMarker(dfd, image)
}

func readMarker(dfd int, image string) (string, error) {
	fd, err := unix.Openat(dfd, filepath.Base(image), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return "", nil
	}
	if errors.Is(err, unix.ELOOP) {
		return "", fmt.Errorf("reading the owner of %s: the marker %s is a symlink; refused", image, Path(image))
	}
	if err != nil {
		return "", fmt.Errorf("reading the owner of %s: %w", image, err)
	}
	f := os.NewFile(uintptr(fd), Path(image))
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("reading the owner of %s: the marker %s is not a regular file", image, Path(image))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxID+2))
	if err != nil {
		return "", fmt.Errorf("reading the owner of %s: %w", image, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Claim records host as the owner of image, unless it is already. An empty
// host records nothing. The marker is written atomically (a temporary file
// created exclusively, fsynced, renamed; the directory fsynced), relative to
// the marker directory opened without following symlinks.
func Claim(image, host string) error {
	if host == "" {
		return nil
	}
	dfd, err := markerDir(image, true)
	if err != nil {
		return fmt.Errorf("recording the owner of %s: %w", image, err)
	}
	defer unix.Close(dfd)
	if cur, err := readMarker(dfd, image); err == nil && cur == host {
		return nil
	}
	name := filepath.Base(image)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("recording the owner of %s: %w", image, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.WriteString(host + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("recording the owner of %s: %w", image, err)
	}
	_ = unix.Fsync(dfd)
	return nil
}

// MayRemove reports whether host may remove image: when host is "", when
// the image has no marker, or when host owns it. Otherwise it returns the
// owner. A marker that cannot be read keeps the image (and returns the
// error).
func MayRemove(image, host string) (ok bool, owner string, err error) {
	if host == "" {
		return true, "", nil
	}
	owner, err = Of(image)
	if err != nil {
		return false, "", err
	}
	return owner == "" || owner == host, owner, nil
}

// Forget removes the marker of image (after the image itself was removed).
// A missing marker is not an error.
func Forget(image string) error {
	dfd, err := markerDir(image, false)
	if err != nil {
		return fmt.Errorf("removing the owner marker of %s: %w", image, err)
	}
	if dfd < 0 {
		return nil
	}
	defer unix.Close(dfd)
	if err := unix.Unlinkat(dfd, filepath.Base(image), 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing the owner marker of %s: %w", image, err)
	}
	return nil
}

// Stale lists the markers in payloadDir that host wrote whose image is gone
// (removed by another host after it claimed the image back, or by hand), as
// image paths for Forget.
func Stale(payloadDir, host string) ([]string, error) {
	dfd, err := markerDir(filepath.Join(payloadDir, "x"), false)
	if err != nil {
		return nil, fmt.Errorf("listing owner markers: %w", err)
	}
	if dfd < 0 {
		return nil, nil
	}
	d := os.NewFile(uintptr(dfd), filepath.Join(payloadDir, Dir))
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("listing owner markers: %w", err)
	}
	var out []string
	for _, e := range ents {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		img := filepath.Join(payloadDir, e.Name())
		if _, err := os.Lstat(img); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if o, err := Of(img); err == nil && (o == host || host == "") {
			out = append(out, img)
		}
	}
	return out, nil
}
