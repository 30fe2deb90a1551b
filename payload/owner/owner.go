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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmpayload/vmpayload/internal/atomicfile"
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

// Of returns the host id recorded for image, and "" with a nil error when
// the image has no marker.
func Of(image string) (string, error) {
	b, err := os.ReadFile(Path(image))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the owner of %s: %w", image, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Claim records host as the owner of image, unless it is already. An empty
// host records nothing.
func Claim(image, host string) error {
	if host == "" {
		return nil
	}
	if cur, err := Of(image); err == nil && cur == host {
		return nil
	}
	dir := filepath.Join(filepath.Dir(image), Dir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("recording the owner of %s: %w", image, err)
	}
	if err := atomicfile.WriteFile(Path(image), []byte(host+"\n"), 0o600, -1); err != nil {
		return fmt.Errorf("recording the owner of %s: %w", image, err)
	}
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
	if err := os.Remove(Path(image)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the owner marker of %s: %w", image, err)
	}
	return nil
}

// Stale lists the markers in payloadDir that host wrote whose image is gone
// (removed by another host after it claimed the image back, or by hand), as
// image paths for Forget.
func Stale(payloadDir, host string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(payloadDir, Dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
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
