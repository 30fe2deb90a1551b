// Package guest boots real Debian guests under libvirt (qemu:///system) for
// vmpayload's end-to-end tests and reads back what cloud-init did in them.
//
// Images come from build-base.sh (next to this file), which builds and
// caches an ext4 root filesystem plus a kernel and initramfs per Debian
// suite. A guest is a qcow2 overlay on that base, booted directly from the
// kernel with a serial console written to a file. A unit baked into the image
// prints a machine-readable report on the serial console once cloud-init has
// finished and then powers the guest off; WaitReport parses it.
//
// The API is split so that vmpayload's agent can own the payload: Prepare
// creates the overlay and returns domain XML without any payload CD-ROM, the
// caller (the agent) attaches the payload and starts the domain, and
// WaitReport reads the result. Boot does all of it for tests that bring their
// own ISO.
package guest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// Suites the image builder supports.
const (
	// Bookworm is Debian 12 with cloud-init 22.4 and ifupdown (ENI renderer).
	Bookworm = "bookworm"
	// Trixie is Debian 13 with cloud-init 25.1, netplan and systemd-networkd.
	Trixie = "trixie"
)

// Image is a built base image directory.
type Image struct {
	// Suite is the Debian suite, Bookworm or Trixie.
	Suite string
	// Dir is the cache directory holding the files below.
	Dir string
	// Base is the raw ext4 root filesystem used as a read-only backing file.
	Base string
	// Kernel is the kernel for direct boot.
	Kernel string
	// Initrd is the initramfs matching Kernel.
	Initrd string
	// Meta holds the KEY=VALUE pairs of meta.env (KERNEL, CLOUD_INIT,
	// BUILD_SECONDS, RELEASE_DATE, ...).
	Meta map[string]string
}

// BuildScript returns the absolute path of build-base.sh, found next to this
// source file.
func BuildScript() (string, error) {
	p := testenv.RepoPath("test", "guest", "build-base.sh")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("guest: locating build-base.sh: %w", err)
	}
	return p, nil
}

// EnsureImage builds the base image for suite, or reuses the cached one,
// by running build-base.sh. VMPAYLOAD_GUEST_IMAGE_<SUITE> (e.g.
// VMPAYLOAD_GUEST_IMAGE_TRIXIE) names an image directory to use instead,
// without checking that it matches the current scripts. A cold build takes minutes (mmdebstrap); give ctx
// a generous deadline. Build progress is appended to progress if non-nil.
func EnsureImage(ctx context.Context, suite string, progress *bytes.Buffer) (*Image, error) {
	if suite != Bookworm && suite != Trixie {
		return nil, fmt.Errorf("guest: ensuring image: unknown suite %q", suite)
	}
	if dir := os.Getenv("VMPAYLOAD_GUEST_IMAGE_" + strings.ToUpper(suite)); dir != "" {
		return LoadImage(dir)
	}
	script, err := BuildScript()
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "/bin/bash", script, suite)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	runErr := cmd.Run()
	if progress != nil {
		progress.Write(stderr.Bytes())
	}
	if runErr != nil {
		return nil, fmt.Errorf("guest: building %s image with %s: %w\n%s", suite, script, runErr, tail(stderr.String(), 40))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return LoadImage(strings.TrimSpace(lines[len(lines)-1]))
}

// LoadImage opens a complete image directory made by build-base.sh.
func LoadImage(dir string) (*Image, error) {
	if _, err := os.Stat(filepath.Join(dir, "complete")); err != nil {
		return nil, fmt.Errorf("guest: loading image %s: not a complete image: %w", dir, err)
	}
	img := &Image{
		Dir:    dir,
		Base:   filepath.Join(dir, "base.raw"),
		Kernel: filepath.Join(dir, "vmlinuz"),
		Initrd: filepath.Join(dir, "initrd.img"),
		Meta:   map[string]string{},
	}
	f, err := os.Open(filepath.Join(dir, "meta.env"))
	if err != nil {
		return nil, fmt.Errorf("guest: loading image %s: %w", dir, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			img.Meta[k] = strings.Trim(v, `"`)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("guest: reading %s/meta.env: %w", dir, err)
	}
	img.Suite = img.Meta["SUITE"]
	for _, p := range []string{img.Base, img.Kernel, img.Initrd} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("guest: loading image %s: %w", dir, err)
		}
	}
	return img, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
