package recipe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
)

// Outcome says what Rebuild did.
type Outcome string

// Rebuild outcomes.
const (
	// OutcomeIntact: the image at the recorded path has the recorded sha256.
	OutcomeIntact Outcome = "intact"
	// OutcomeRebuilt: the image was missing or differed and was built again.
	OutcomeRebuilt Outcome = "rebuilt"
)

// RebuildOptions say where images may live and how they are written.
type RebuildOptions struct {
	// PayloadDir is the directory images live in; a recipe whose path is
	// not directly inside it is refused. It is created (mode 0711, as the
	// package's tmpfiles.d entry makes it) when missing.
	PayloadDir string
	// SecretsDir is where the job's *_secret names resolve.
	SecretsDir string
	// Mode and GID of a rebuilt image (see image.Options; GID -1 keeps
	// the process group).
	Mode os.FileMode
	GID  int
	// DomainUUID is the UUID of the domain whose recipe r is. When set,
	// an image whose file name does not start with "UUID-" (how the agent
	// and vmpayload recipe --domain-xml name images) is refused: a recipe
	// in one domain must not rebuild, nor claim, another domain's image.
	// The hook and the agent's start-up set it.
	DomainUUID string
	// Keys opens a sealed recipe; when nil, Rebuild reads
	// KeyFile(SecretsDir) when it has to build a sealed recipe's image.
	Keys *seal.Keyring
}

// ErrRefused marks a recipe whose image path Rebuild will not touch.
var ErrRefused = errors.New("refused")

// ErrContentChanged marks a rebuild whose bytes would differ from the
// recorded sha256; nothing was written.
var ErrContentChanged = errors.New("content changed")

// Rebuild makes sure the image r describes is in place. When a regular
// file at r.Path has the recorded sha256 it returns OutcomeIntact;
// otherwise it renders r.Job (secrets resolved only through
// opt.SecretsDir), checks that the image bytes hash to the recorded
// sha256 in the recorded ISO layout (r.ISOLayout), writes them atomically at r.Path (temporary file, fsync, read
// back and verified, rename) and returns OutcomeRebuilt. Errors are one
// line naming the path: a path outside opt.PayloadDir, with "..", or
// naming a symlink or other non-regular file, or whose name does not start
// with opt.DomainUUID when that is set (ErrRefused); a sealed recipe whose
// key is missing (seal.ErrNoKey, naming the key file; only when the image
// must be built); a secret that vanished; content that would differ
// (ErrContentChanged, naming the secrets the job uses), in which case
// nothing is written.
func Rebuild(ctx context.Context, r *Recipe, opt RebuildOptions) (Outcome, error) {
	if r == nil {
		return "", fmt.Errorf("rebuilding a payload image: no recipe")
	}
	if r.valued() {
		if err := r.Check(); err != nil {
			return "", fmt.Errorf("rebuilding the payload files of %s: %w", strings.Join(r.Names(), ", "), err)
		}
		return rebuildValues(ctx, r, opt)
	}
	if err := checkPath(r.Path, opt.PayloadDir); err != nil {
		return "", err
	}
	if err := checkOwnName(r.Path, opt.DomainUUID); err != nil {
		return "", err
	}
	if err := r.Check(); err != nil {
		return "", fmt.Errorf("rebuilding the payload image %s: %w", r.Path, err)
	}
	intact, err := hasSHA256(r.Path, "image", r.Size, r.SHA256)
	if err != nil {
		return "", err
	}
	if intact {
		return OutcomeIntact, nil
	}
	r, checked, err := openChecked(r, opt, "the payload image "+r.Path, "its")
	if err != nil {
		return "", err
	}
	rendered, err := payload.Render(checked, payload.Options{
		Identity: &payload.Identity{ContentHash: r.ContentHash, InstanceID: r.InstanceID},
	})
	if err != nil {
		return "", fmt.Errorf("rebuilding the payload image %s: %s", r.Path, oneLine(err))
	}
	_, err = rendered.Write(ctx, r.Path, payload.Options{Mode: opt.Mode, GID: opt.GID, ExpectSHA256: r.SHA256, ISOLayout: r.ISOLayout})
	if errors.Is(err, image.ErrChecksum) {
		why := "the job's content"
		if refs := r.secretRefs(); len(refs) > 0 {
			why = "secret " + strings.Join(refs, ", ")
			if len(refs) > 1 {
				why = "secrets " + strings.Join(refs, ", ")
			}
		}
		return "", fmt.Errorf("rebuilding the payload image %s: %w: %s changed since the image was recorded (the rebuilt image would not have sha256 %s); nothing was written", r.Path, ErrContentChanged, why, r.SHA256)
	}
	if err != nil {
		return "", fmt.Errorf("rebuilding the payload image %s: %s", r.Path, oneLine(err))
	}
	return OutcomeRebuilt, nil
}

// openChecked opens r when it is sealed (its key from opt), makes the
// payload directory and checks r's job again (its secrets resolved only
// through opt.SecretsDir), for a rebuild of what; whose ("its", "the")
// is how the messages name the recipe.
func openChecked(r *Recipe, opt RebuildOptions, what, whose string) (*Recipe, *payload.Checked, error) {
	if r.Sealed() {
		keys := opt.Keys
		if keys == nil && opt.SecretsDir == "" {
			return nil, nil, fmt.Errorf("rebuilding %s: %s recipe is sealed and no secrets directory holds the recipe key", what, whose)
		}
		if keys == nil {
			k, err := seal.Load(KeyFile(opt.SecretsDir))
			if err != nil {
				return nil, nil, fmt.Errorf("rebuilding %s: %s recipe is sealed: %w", what, whose, err)
			}
			keys = k
		}
		o := *r
		if err := o.Open(keys); err != nil {
			return nil, nil, fmt.Errorf("rebuilding %s: %w", what, err)
		}
		r = &o
	}
	if err := ensureDir(opt.PayloadDir); err != nil {
		return nil, nil, err
	}
	checked, rep := payload.CheckJob(&r.Job, payload.CheckOptions{Secrets: true, SecretsDir: opt.SecretsDir})
	if !rep.OK() {
		return nil, nil, fmt.Errorf("rebuilding %s: %s", what, oneLine(rep.Err()))
	}
	return r, checked, nil
}

// checkPath refuses an image path that is not directly inside dir.
func checkPath(p, dir string) error {
	if dir == "" || !filepath.IsAbs(dir) {
		return fmt.Errorf("rebuilding the payload image %s: %w: the payload directory %q is not an absolute path", p, ErrRefused, dir)
	}
	if hasDotDot(p) {
		return fmt.Errorf("rebuilding the payload image %s: %w: the path contains \"..\"", p, ErrRefused)
	}
	c := filepath.Clean(p)
	if !filepath.IsAbs(c) || filepath.Dir(c) != filepath.Clean(dir) || c != p {
		return fmt.Errorf("rebuilding the payload image %s: %w: the path is not directly inside the payload directory %s", p, ErrRefused, filepath.Clean(dir))
	}
	if b := filepath.Base(c); strings.HasPrefix(b, ".") {
		return fmt.Errorf("rebuilding the payload image %s: %w: hidden file names are reserved for temporary files", p, ErrRefused)
	}
	return nil
}

// checkOwnName refuses an image path whose file name does not start with
// the domain's UUID and a "-" (nothing to check when uuid is "").
func checkOwnName(p, uuid string) error {
	if uuid == "" {
		return nil
	}
	b := filepath.Base(p)
	if len(b) <= len(uuid) || !strings.EqualFold(b[:len(uuid)], uuid) || b[len(uuid)] != '-' {
		return fmt.Errorf("rebuilding the payload image %s: %w: the image name does not start with this domain's UUID %s (a recipe may only name its own domain's images, %s-…)", p, ErrRefused, uuid, uuid)
	}
	return nil
}

// hashBuffers are hasSHA256's read buffers: the agent's start-up checks
// every domain's image, and io.Copy made a new 32 KiB buffer for each. Kept
// (issue 33): agent BenchmarkStartupRecipes (1000 recipes), with/without
// alternated 7x, median 428 ms vs 452 ms (~5 % of the start-up).
var hashBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// hasSHA256 reports whether a regular file at p has the given size and
// sha256 (size only when sum is ""). A missing file is false; a symlink or
// another kind of file is refused. what ("image", "file") names p in errors.
func hasSHA256(p, what string, size int64, sum string) (bool, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("rebuilding the payload %s %s: %w", what, p, err)
	}
	if !fi.Mode().IsRegular() {
		return false, fmt.Errorf("rebuilding the payload %s %s: %w: it is a %s, not a regular file", what, p, ErrRefused, image.FileKind(fi.Mode()))
	}
	if fi.Size() != size || sum == "" {
		return fi.Size() == size, nil
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, fmt.Errorf("rebuilding the payload image %s: reading the existing image: %w", p, err)
	}
	defer f.Close()
	h := sha256.New()
	buf := hashBuffers.Get().(*[]byte)
	defer hashBuffers.Put(buf)
	if _, err := io.CopyBuffer(h, io.LimitReader(f, size+1), *buf); err != nil {
		return false, fmt.Errorf("rebuilding the payload image %s: hashing the existing image: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)) == sum, nil
}

// ensureDir creates the payload directory (one level) when it is missing.
func ensureDir(dir string) error {
	err := os.Mkdir(dir, 0o711)
	if err == nil || errors.Is(err, os.ErrExist) {
		return nil
	}
	return fmt.Errorf("creating the payload directory %s: %w", dir, err)
}

// oneLine flattens an error to one line (a validation error lists every
// problem on its own line).
func oneLine(err error) string {
	var ve *job.ValidationError
	if errors.As(err, &ve) && len(ve.Errors) > 0 {
		parts := make([]string, len(ve.Errors))
		for i, e := range ve.Errors {
			parts[i] = e.String()
		}
		return strings.Join(parts, "; ")
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
