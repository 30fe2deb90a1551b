// Images on the host outside a job: the payload directory, removal of
// images no domain uses, and the agent's start-up work over the defined
// domains (rebuilding images from recipes, collecting orphans).

package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/owner"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

// PayloadDirMode is the permission of a payload directory the agent creates.
const PayloadDirMode = 0o711

// EnsurePayloadDir makes sure the payload directory exists. A missing one
// (an operator's rm -rf, a tmpfs mounted over it, a tmpfiles clean-up) is
// recreated with PayloadDirMode and the image group; an existing directory
// is left as the operator set it up. A symlink or any non-directory in its
// place is refused (spool.ErrNotDir): images are never written through a
// link. created reports whether it made the directory.
func (e *Engine) EnsurePayloadDir() (created bool, err error) {
	st, err := os.Lstat(e.PayloadDir)
	if err == nil && st.IsDir() {
		return false, nil
	}
	created, err = spool.EnsureDir(e.PayloadDir, PayloadDirMode, e.ImageGID)
	if err != nil {
		return false, fmt.Errorf("payload directory: %w", err)
	}
	if created {
		e.Metrics.DirRecreated(metrics.DirPayload)
		e.log().Warn("payload directory was missing; recreated it", "dir", e.PayloadDir, "mode", fmt.Sprintf("%#o", PayloadDirMode))
	}
	return created, nil
}

// Owns reports whether path is an image this agent manages: a file directly
// in the payload directory.
func (e *Engine) Owns(path string) bool {
	return delivery.Owns(e.PayloadDir, path)
}

// removeImage deletes an image of ours; prebuilt images elsewhere are never
// touched, nor images another host claimed (a shared payload directory: the
// domain lives on there now, e.g. after a live migration). It reports
// whether it removed the image or queued its removal for a retry.
func (e *Engine) removeImage(path, reason string) bool {
	if !e.Owns(path) || !e.mayRemove(path, reason) {
		return false
	}
	if err := os.Remove(path); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			e.log().Warn("removing payload image failed; retrying at each rescan", "path", path, "reason", reason, "err", err)
			e.Cleanups.add(path, reason, err)
			return true
		}
		return false
	}
	e.forget(path)
	e.Metrics.ImageRemoved(reason)
	e.log().Info("removed payload image", "path", path, "reason", reason)
	return true
}

// mayRemove reports whether this host may remove the image (its owner
// marker names this host, or there is none) and logs why not.
func (e *Engine) mayRemove(path, reason string) bool {
	ok, by, err := owner.MayRemove(path, e.HostID)
	if err != nil {
		e.log().Warn("payload image kept: its owner marker is unreadable", "path", path, "reason", reason, "err", err)
		return false
	}
	if !ok {
		e.log().Info("payload image kept: another host owns it (shared payload directory)", "path", path, "reason", reason, "owner", by, "host", e.HostID)
	}
	return ok
}

// forget removes the owner marker of a removed image.
func (e *Engine) forget(path string) {
	if err := owner.Forget(path); err != nil {
		e.log().Warn("removing the owner marker of a removed payload image failed", "path", path, "err", err)
	}
}

// dropUnattached removes an image this job built when attaching it failed
// and the domain's definition does not reference it, so a failed job leaves
// nothing behind. (While libvirt is unreachable the image is kept for the
// retry.)
func (e *Engine) dropUnattached(ctx context.Context, uuid, imgPath string) {
	d, err := e.Host.Domain(ctx, uuid)
	if err != nil {
		return // unknown state: orphan GC at start-up will judge it
	}
	if doc, err := domxml.Read(d.InactiveXML); err != nil || slices.Contains(doc.ReferencedFiles(), imgPath) {
		return
	}
	e.removeImage(imgPath, metrics.ReasonUnattached)
}

// RemoveDomainImages deletes the images of a domain that is gone (undefined).
func (e *Engine) RemoveDomainImages(uuid string) {
	if uuid == "" {
		return
	}
	if st, err := os.Lstat(e.PayloadDir); err != nil || !st.IsDir() {
		return // missing, or a symlink that is never followed
	}
	matches, _ := filepath.Glob(filepath.Join(e.PayloadDir, uuid+"-*"))
	for _, m := range matches {
		e.removeImage(m, metrics.ReasonUndefined)
	}
}

// Defined is a defined domain as the agent's start-up reads it: its
// listing, and the recipe its persistent definition carries, read once for
// RebuildImages and CollectOrphans.
type Defined struct {
	libvirtx.DomainInfo
	// Recipe is the domain's recipe; nil with a nil RecipeErr when it has
	// none.
	Recipe *recipe.Recipe
	// RecipeErr is why a recipe that is present could not be read.
	RecipeErr error
	// Also holds the other definitions whose drives and recipe name files
	// the domain still needs: a running domain's live XML (it may run with
	// media its persistent definition no longer names: resumed from a
	// managed save after a job changed them, or migrated in), a shut-off
	// domain's managed save image's XML (its next start resumes with it).
	Also []string
	// KeepAll keeps every image named by the domain's UUID: one of those
	// definitions could not be read.
	KeepAll bool
}

// Definitions is the listing of every defined domain that the start-up's
// RebuildImages and CollectOrphans share.
type Definitions struct {
	Domains []Defined
	// ListedAt is when the listing began. CollectOrphans keeps the files
	// changed since (a domain defined after it, whose image the libvirt
	// hook built, is not in Domains).
	ListedAt time.Time
}

// ListDefined lists the defined domains with their definitions and reads
// each one's recipe, once for RebuildImages and CollectOrphans (each had
// listed and read them on its own: two calls to libvirt and two recipe
// parses per domain at every start).
func (e *Engine) ListDefined(ctx context.Context) (Definitions, error) {
	defs := Definitions{ListedAt: time.Now()}
	doms, err := e.Host.ListDomains(ctx)
	if err != nil {
		return defs, fmt.Errorf("listing the defined domains: %w", err)
	}
	defs.Domains = make([]Defined, len(doms))
	for i, d := range doms {
		defs.Domains[i].DomainInfo = d
		if rc, ok, err := recipe.FromDomainXML(d.InactiveXML); err != nil {
			defs.Domains[i].RecipeErr = err
		} else if ok {
			defs.Domains[i].Recipe = rc
		}
		var other string
		if d.Active {
			other, err = e.Host.LiveXML(ctx, d.UUID)
		} else {
			other, err = e.Host.SavedXML(ctx, d.UUID)
		}
		switch {
		case err == nil && other != "":
			defs.Domains[i].Also = []string{other}
		case err != nil && !libvirtx.IsNotFound(err):
			// Unreadable (a driver without managed save XML, a state
			// that changed under the listing): keep its images.
			defs.Domains[i].KeepAll = true
			e.log().Debug("keeping every payload image of the domain: a definition could not be read", "domain", d.Name, "uuid", d.UUID, "err", err)
		}
	}
	return defs, nil
}

// CollectOrphans removes images in the payload directory that no domain of
// defs references (neither a drive nor a recipe names them, in the
// persistent definition, a running domain's live one or a managed save
// image's), and leftover temp files. A file changed after defs was listed is kept: it may belong
// to a domain the listing does not know (defined since, its image built by
// the libvirt hook). File times come from the kernel's coarse clock, a tick
// behind at most, and every file of an earlier run predates the listing.
// A file of a running domain that its QEMU was started with (its live
// definition names it) is removed only when the domain stops (see
// DomainStopped). Run it before jobs start, after RebuildImages.
func (e *Engine) CollectOrphans(ctx context.Context, defs Definitions) (int, error) {
	used := map[string]bool{}
	use := func(files []string) {
		for _, f := range files {
			used[filepath.Clean(f)] = true
		}
	}
	var keepPrefixes []string
	for _, d := range defs.Domains {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		doc, err := domxml.Read(d.InactiveXML)
		if err != nil {
			return 0, fmt.Errorf("reading the definition of %s: %w", d.Name, err)
		}
		use(doc.ReferencedFiles())
		// The image a recipe names is kept even when no drive references
		// it (yet): the recipe is how it is rebuilt after a reboot.
		if d.Recipe != nil {
			use(d.Recipe.Files())
		}
		// A managed save's definition: its drives and recipe. (A running
		// domain's live definition is for the loop below: such a file is
		// kept until the domain stops, then removed; see supersede.)
		for _, x := range d.Also {
			if d.Active {
				break
			}
			doc, err := domxml.Read(x)
			if err != nil {
				d.KeepAll = true
				continue
			}
			use(doc.ReferencedFiles())
			if rc, ok, err := recipe.FromDocument(doc); err == nil && ok {
				use(rc.Files())
			}
		}
		if d.KeepAll && d.UUID != "" {
			keepPrefixes = append(keepPrefixes, d.UUID+"-")
		}
	}
	ents, err := os.ReadDir(e.PayloadDir)
	if err != nil {
		return 0, fmt.Errorf("listing payload directory: %w", err)
	}
	var running map[string]libvirtx.DomainInfo // by UUID, made when needed
	n := 0
	for _, ent := range ents {
		p := filepath.Join(e.PayloadDir, ent.Name())
		if ent.IsDir() || used[p] || slices.ContainsFunc(keepPrefixes, func(k string) bool { return strings.HasPrefix(ent.Name(), k) }) {
			continue
		}
		if fi, err := ent.Info(); err != nil || fi.ModTime().After(defs.ListedAt) {
			continue // gone, or newer than the listing
		}
		if running == nil {
			running = map[string]libvirtx.DomainInfo{}
			for _, d := range defs.Domains {
				if d.Active {
					running[d.UUID] = d.DomainInfo
				}
			}
		}
		// A file of a running domain (named <uuid>-…) that its QEMU was
		// started with waits until the domain stops (see supersede).
		if d, ok := running[uuidPrefix(ent.Name())]; ok {
			if e.supersede(d, e.env().ReadLive(ctx, d), p, metrics.ReasonOrphan) {
				n++
			}
			continue
		}
		if e.removeImage(p, metrics.ReasonOrphan) {
			n++
		}
	}
	// Markers of this host whose image is gone (removed by another host
	// that had claimed it, or by hand).
	stale, err := owner.Stale(e.PayloadDir, e.HostID)
	if err != nil {
		e.log().Warn("listing owner markers failed", "err", err)
	}
	for _, p := range stale {
		e.forget(p)
	}
	return n, nil
}

// uuidPrefix returns the domain UUID a payload file name starts with
// (<uuid>-<content hash>.ext), or "".
func uuidPrefix(name string) string {
	if len(name) < 37 || name[36] != '-' || !domxml.IsUUID(name[:36]) {
		return ""
	}
	return domxml.CanonicalUUID(name[:36])
}

// RebuildStats counts the outcomes of RebuildImages.
type RebuildStats struct {
	Rebuilt, Intact, Failed int
}

// RebuildImages makes sure the image of every defined domain whose
// persistent definition carries a recipe is in place (recipe.Rebuild with
// the engine's payload directory, secrets directory, image mode and group):
// after a host reboot emptied the payload directory it builds them again,
// byte-identical. Each outcome is logged; a recipe that cannot be read or
// rebuilt is logged with its one-line reason (never a secret: recipes hold
// none, and Rebuild's errors name secrets only by name) and counted in
// Failed, and the others go on; only a cancelled ctx stops it. defs is
// ListDefined's. Run it at start-up, before CollectOrphans and before jobs
// start.
func (e *Engine) RebuildImages(ctx context.Context, defs Definitions) (RebuildStats, error) {
	var st RebuildStats
	opt := recipe.RebuildOptions{PayloadDir: e.PayloadDir, SecretsDir: e.SecretsDir, Mode: e.ImageMode, GID: e.ImageGID}
	if e.SecretsDir == "" {
		opt.Keys = noSecretsDirKeys
	}
	for _, d := range defs.Domains {
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		rc, err := d.Recipe, d.RecipeErr
		if rc == nil && err == nil {
			continue
		}
		if err != nil {
			st.Failed++
			e.log().Error("payload recipe of domain unreadable; image not rebuilt", "domain", d.Name, "uuid", d.UUID, "err", err)
			continue
		}
		t0 := time.Now()
		opt.DomainUUID = d.UUID // a recipe names only its own domain's image
		out, err := recipe.Rebuild(ctx, rc, opt)
		// the image, or the files of named values (none for values that
		// live in the definition)
		files := rc.Files()
		path := strings.Join(files, " ")
		if err != nil {
			st.Failed++
			e.log().Error("rebuilding payload image failed", "domain", d.Name, "uuid", d.UUID, "path", path, "err", err)
			continue
		}
		// This host built it, or its domain runs here, or nobody claimed it
		// yet (an image from before owner markers): it is this host's now.
		// An intact image of a stopped domain that another host claimed
		// stays that host's: the domain may run there (a shared payload
		// directory, a definition left behind by a migration).
		for _, f := range files {
			if by, err := owner.Of(f); out == recipe.OutcomeRebuilt || d.Active || (err == nil && by == "") {
				e.claim(f)
			}
		}
		switch out {
		case recipe.OutcomeRebuilt:
			st.Rebuilt++
			e.log().Info("payload image rebuilt from its recipe", "domain", d.Name, "uuid", d.UUID, "path", path,
				"sha256", rc.SHA256, "duration", time.Since(t0).Round(time.Microsecond))
		default:
			st.Intact++
			e.log().Debug("payload image intact", "domain", d.Name, "uuid", d.UUID, "path", path)
		}
	}
	return st, nil
}
