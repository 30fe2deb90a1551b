package image

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"golang.org/x/sys/unix"
)

const (
	isoBlock       = 2048
	isoPVDOffset   = 16 * isoBlock
	isoFileMode    = 0o444
	isoDirMode     = 0o555
	maxImageBytes  = MaxContentBytes + 16<<20 // hard cap on any image we build
	workspacePrefx = "vmpayload-iso-"
)

// buildISO renders spec into an ISO9660 image in layout v in memory and
// returns its bytes. The in-memory writer (layoutISO) handles every spec but
// one rare class (colliding ISO short names whose renumbering could
// interact), which goes to buildISODiskfs; both give the same bytes (for
// isoCurrent, the go-diskfs image's Joliet root is repaired by
// repairJolietRoot). The content stamp is hashed on a second goroutine
// while the image is laid out.
func buildISO(ctx context.Context, spec Spec, dirs []string, v isoVariant) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("build iso: %w", err)
	}
	stampc := make(chan time.Time, 1)
	go func() {
		t, _ := Stamp(spec)
		stampc <- t
	}()
	img, ok, err := layoutISO(spec, dirs, func() time.Time { return <-stampc }, v)
	if ok {
		return img, err
	}
	if img, err = buildISODiskfs(ctx, spec, dirs); err != nil || v == isoLegacyJoliet {
		return img, err
	}
	if err := repairJolietRoot(img); err != nil {
		return nil, fmt.Errorf("repair the joliet root of the go-diskfs image: %w", err)
	}
	return img, nil
}

// buildISODiskfs renders spec into an ISO9660 image with go-diskfs and
// normalizeISO and returns its bytes: the fallback of buildISO and, in
// tests, the oracle the in-memory writer's isoLegacyJoliet layout is
// compared with byte for byte. Its Joliet root is zeroed when the last file
// is empty or a multiple of 2048 bytes (see isowriter.go).
// go-diskfs needs a workspace directory holding the tree; we create it ourselves
// under workspaceParent(), so we can set modes and always remove it. It
// holds a copy of the content (at most MaxContentBytes) while the build runs.
func buildISODiskfs(ctx context.Context, spec Spec, dirs []string) (img []byte, err error) {
	ws, err := os.MkdirTemp(workspaceParent(), workspacePrefx)
	if err != nil {
		return nil, fmt.Errorf("create iso workspace: %w", err)
	}
	defer func() {
		if rerr := removeWorkspace(ws); rerr != nil && err == nil {
			err = rerr
		}
	}()

	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(ws, filepath.FromSlash(d)), 0o755); err != nil {
			return nil, fmt.Errorf("create workspace dir %q: %w", d, err)
		}
	}
	joliet := true
	for _, e := range spec.Entries {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("build iso: %w", err)
		}
		if strings.Contains(e.Path, "/") {
			joliet = false
		}
		p := filepath.Join(ws, filepath.FromSlash(e.Path))
		if err := os.WriteFile(p, e.Data, 0o644); err != nil {
			return nil, fmt.Errorf("write workspace file %q: %w", e.Path, err)
		}
		if err := os.Chmod(p, isoFileMode); err != nil {
			return nil, fmt.Errorf("chmod workspace file %q: %w", e.Path, err)
		}
	}
	// Directories last (deepest first), so we could still write into them above.
	for _, d := range slices.Backward(append([]string{"."}, dirs...)) {
		if err := os.Chmod(filepath.Join(ws, filepath.FromSlash(d)), isoDirMode); err != nil {
			return nil, fmt.Errorf("chmod workspace dir %q: %w", d, err)
		}
	}

	// Size the buffer for the whole image up front: growing it by doubling
	// from go-diskfs's small writes was the largest allocation of a build.
	mem := &memFile{max: maxImageBytes, buf: make([]byte, 0, isoSizeHint(spec, dirs))}
	fsys, err := iso9660.Create(file.New(mem, false), 0, 0, isoBlock, ws)
	if err != nil {
		return nil, fmt.Errorf("create iso9660 filesystem: %w", err)
	}
	opts := iso9660.FinalizeOptions{
		RockRidge:        true,
		Joliet:           joliet,
		VolumeIdentifier: spec.Label,
	}
	if err := fsys.Finalize(opts); err != nil {
		return nil, fmt.Errorf("finalize iso9660 filesystem: %w", err)
	}
	// Finalize removes the workspace on success; removeWorkspace copes with that.
	if len(mem.buf) < isoPVDOffset+isoBlock {
		return nil, fmt.Errorf("finalize iso9660 filesystem: image only %d bytes", len(mem.buf))
	}
	blocks := int64(binary.LittleEndian.Uint32(mem.buf[isoPVDOffset+80:]))
	size := blocks * isoBlock
	if size > maxImageBytes || size < int64(len(mem.buf))-isoBlock || size < isoPVDOffset+isoBlock {
		return nil, fmt.Errorf("finalize iso9660 filesystem: volume size %d blocks does not match %d written bytes", blocks, len(mem.buf))
	}
	// The last block may be only partly written; the volume is whole blocks.
	if n := int64(len(mem.buf)); n < size {
		mem.buf = append(mem.buf, make([]byte, size-n)...)
	}
	img = mem.buf[:size]
	stamp, _ := Stamp(spec)
	if err := normalizeISO(img, stamp); err != nil {
		return nil, err
	}
	return img, nil
}

// isoSizeHint estimates the size of the ISO image of spec: the system area
// and volume descriptors, every file in whole blocks, and directory records,
// path tables and Rock Ridge/Joliet entries for every file and directory. A
// low estimate only costs a reallocation.
func isoSizeHint(spec Spec, dirs []string) int {
	n := 28 * isoBlock
	for _, e := range spec.Entries {
		n += (len(e.Data)+isoBlock-1)/isoBlock*isoBlock + 512
	}
	n += len(dirs) * isoBlock
	return min(n, maxImageBytes)
}

// shmDir is the tmpfs preferred for the ISO workspace.
var shmDir = "/dev/shm"

// workspaceParent returns where the ISO workspace is created: $TMPDIR when
// it is set, else the tmpfs /dev/shm when it is a writable directory, else
// os.TempDir(). The workspace lives for one build and holds a handful of
// small files; on a disk file system (ext4, with discard) creating, reading
// and removing them cost 2-10 ms per image in metadata and journal work,
// which made the workspace the largest part of a build. On tmpfs the
// content never touches a disk either, which suits payloads holding password
// hashes. The directory is created 0700 with a random name, as in /tmp.
func workspaceParent() string {
	if os.Getenv("TMPDIR") != "" {
		return os.TempDir()
	}
	if st, err := os.Stat(shmDir); err == nil && st.IsDir() && unix.Access(shmDir, unix.W_OK|unix.X_OK) == nil {
		return shmDir
	}
	return os.TempDir()
}

// removeWorkspace makes every directory writable again (an unprivileged
// builder could not unlink inside 0555 dirs) and removes the tree.
func removeWorkspace(ws string) error {
	if _, err := os.Lstat(ws); os.IsNotExist(err) {
		return nil
	}
	_ = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(ws); err != nil {
		return fmt.Errorf("remove iso workspace: %w", err)
	}
	return nil
}
