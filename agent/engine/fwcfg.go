// Ignition configs delivered by fw_cfg (issue 34): the config file lives
// in the payload directory like an image, and the domain's persistent
// definition names it in <sysinfo type='fwcfg'> entries instead of a drive.

package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

// NoticeFwCfgNextColdStart is the result's notice of a fw_cfg job done on a
// running domain; NoticeIgnitionFirstBoot follows it (a running guest has
// booted, and Ignition applies a config only on a first boot).
const NoticeFwCfgNextColdStart = "the domain is running and QEMU reads fw_cfg only when it starts: the persistent definition and the config file were updated, and the new file reaches the guest only at its next cold start (shut down and started again; a reboot inside the guest or `virsh reboot` keeps the file QEMU read at launch)"

// NoticeFwCfgDetachRunning is the result's notice of a detach that removed
// the fw_cfg entries of a running domain.
const NoticeFwCfgDetachRunning = "the domain is running and QEMU reads fw_cfg only when it starts: the fw_cfg entries left the persistent definition and the config file was removed, and the guest keeps the copy QEMU read at launch until its next cold start"

// ownsFwCfg reports whether a fw_cfg entry is one vmpayload delivers an
// Ignition config with: an Ignition name and a file in the payload
// directory. Entries a user wrote by hand elsewhere are never removed.
func (e *Engine) ownsFwCfg(en domxml.FwCfgEntry) bool {
	return domxml.IsIgnitionFwCfg(en.Name) && e.Owns(en.File)
}

// dropFwCfg removes the Ignition fw_cfg entries vmpayload wrote from the
// edited definition: a domain has one payload, and an image replaces a
// config delivered by fw_cfg. The files go after the job succeeded
// (ownedFwCfgFiles).
func (e *Engine) dropFwCfg(ed *domxml.Edit) {
	ed.RemoveFwCfgEntries(e.ownsFwCfg)
}

// ownedFwCfgFiles returns the files of the Ignition fw_cfg entries
// vmpayload wrote into domainXML.
func (e *Engine) ownedFwCfgFiles(domainXML string) []string {
	ents, err := domxml.FwCfgEntries(domainXML)
	if err != nil {
		return nil
	}
	var out []string
	for _, en := range ents {
		if e.ownsFwCfg(en) && !slices.Contains(out, en.File) {
			out = append(out, en.File)
		}
	}
	return out
}

// attachFwCfg runs a job whose payload is an Ignition config delivered by
// fw_cfg: the config file is written into the payload directory (or an
// identical one kept), and the persistent definition gets the Ignition
// fw_cfg entries naming it and its recipe, in one redefine; a payload
// drive an earlier job left goes (one payload per domain). A stopped
// domain is started when start is set (a failed start puts the
// definition back: see start). A running domain keeps what its QEMU read
// at launch: the result says the file reaches the guest at its next cold
// start (result.TakesEffectNextColdStart) and that Ignition applies it
// only on a first boot (firstBootNotice), unless the running domain
// already has this very file.
func (e *Engine) attachFwCfg(ctx context.Context, dom libvirtx.DomainInfo, rd *payload.Rendered, start bool, r *result.Result) error {
	path := filepath.Join(e.PayloadDir, rd.ImageName(dom.UUID))
	t0 := time.Now()
	res, reused, err := e.writeImage(ctx, rd, path)
	if err != nil {
		return err
	}
	r.Payload = &result.Payload{Image: res.Image, Reused: reused}
	e.Metrics.BuildDone(time.Since(t0))
	rc, err := recipe.New(rd, res)
	el := ""
	if err == nil {
		var keys *seal.Keyring
		if keys, err = e.recipeKeys(); err == nil {
			el, err = rc.Element(keys)
		}
	}
	if err != nil {
		return fmt.Errorf("recording how the Ignition config of %s was built: %w", dom.Name, err)
	}

	t1 := time.Now()
	old, changed, err := e.defineFwCfg(ctx, dom, path, el)
	if err == nil && !dom.Active && start {
		err = e.start(ctx, dom, changed)
	}
	if err != nil {
		if !reused && !libvirtx.IsDisconnected(err) {
			e.dropUnattached(ctx, dom.UUID, path)
		}
		return err
	}
	r.FwCfg = append([]string(nil), domxml.IgnitionFwCfgNames...)
	var live liveSet // what the running QEMU was started with
	if dom.Active {
		r.DomainState = "running"
		live = e.readLive(ctx, dom)
		if !live.hasIgnition(path) {
			r.TakesEffect, r.Notice = result.TakesEffectNextColdStart, NoticeFwCfgNextColdStart
		}
	} else {
		r.DomainState = "shut off"
		if start {
			r.DomainState = "running"
		}
	}
	e.Metrics.AttachDone(time.Since(t1))
	for _, p := range old {
		if p != path {
			e.supersede(dom, live, p, metrics.ReasonSuperseded)
		}
	}
	return nil
}

// supersede removes a payload file the persistent definition of dom no
// longer names, or, when the running domain's QEMU was started with it (the
// live definition names it, or cannot be read), defers that until the
// domain stops: QEMU holds no fw_cfg file open, but libvirt gives the
// files of a stopping domain their owner back and, when one of them is
// gone, skips the others it would have given back after it.
// It reports whether the file was removed (or tried: see removeImage).
func (e *Engine) supersede(dom libvirtx.DomainInfo, live liveSet, path, reason string) bool {
	if !e.Owns(path) {
		return false
	}
	if dom.Active && live.has(path) {
		e.Cleanups.deferUntilStop(dom.UUID, path, reason)
		e.log().Info("payload file kept until the domain stops: its QEMU was started with it", "path", path, "domain", dom.Name, "reason", reason)
		return false
	}
	e.removeImage(path, reason)
	return true
}

// liveSet is what a running domain's live definition names: its files
// (drives and fw_cfg entries) and its fw_cfg entries. An unread one (known
// false) is taken to name every file and no Ignition entry.
type liveSet struct {
	known bool
	files []string
	fwcfg []domxml.FwCfgEntry
}

// readLive reads the live definition of the running domain dom.
func (e *Engine) readLive(ctx context.Context, dom libvirtx.DomainInfo) liveSet {
	x, err := e.Host.LiveXML(ctx, dom.UUID)
	if err != nil {
		e.log().Warn("reading the live definition failed; payload files it may name are kept until the domain stops", "domain", dom.Name, "err", err)
		return liveSet{}
	}
	files, err := domxml.ReferencedFiles(x)
	if err != nil {
		return liveSet{}
	}
	ents, _ := domxml.FwCfgEntries(x)
	return liveSet{known: true, files: files, fwcfg: ents}
}

// has reports whether the live definition names path.
func (l liveSet) has(path string) bool { return !l.known || slices.Contains(l.files, path) }

// hasIgnition reports whether the running QEMU was started with the
// Ignition fw_cfg entries naming path (a re-submitted job): its guest sees
// that config already.
func (l liveSet) hasIgnition(path string) bool {
	n := 0
	for _, en := range l.fwcfg {
		if domxml.IsIgnitionFwCfg(en.Name) {
			if en.File != path {
				return false
			}
			n++
		}
	}
	return l.known && n == len(domxml.IgnitionFwCfgNames)
}

// hasOwnedIgnition reports whether the running QEMU was started with
// Ignition fw_cfg entries vmpayload wrote (an unread definition: maybe).
func (e *Engine) hasOwnedIgnition(l liveSet) bool {
	if !l.known {
		return true
	}
	for _, en := range l.fwcfg {
		if e.ownsFwCfg(en) {
			return true
		}
	}
	return false
}

// defineFwCfg puts the Ignition fw_cfg entries naming path and the recipe
// element el into dom's persistent definition, removing its payload drive
// and guest report channel, and redefines it when that changed anything.
// It returns the payload files the definition named before and no longer
// does (the drive's image, replaced entries' files), and whether it
// redefined the domain.
func (e *Engine) defineFwCfg(ctx context.Context, dom libvirtx.DomainInfo, path, el string) ([]string, bool, error) {
	ed, err := domxml.NewEdit(dom.InactiveXML)
	var (
		cur   domxml.PayloadDisk
		found bool
	)
	if err == nil {
		cur, found, err = ed.FindPayload()
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading the definition of %s: %w", dom.Name, err)
	}
	var old []string
	if found {
		// A running domain keeps the drive live, with its medium, until it
		// stops; the next start has only the fw_cfg entries.
		if _, err := ed.RemovePayloadDrive(); err != nil {
			return nil, false, fmt.Errorf("removing the payload drive from %s: %w", dom.Name, err)
		}
		if cur.Path != "" {
			old = append(old, cur.Path)
		}
	}
	replaced, err := ed.SetFwCfgFile(path, domxml.IgnitionFwCfgNames...)
	if err != nil {
		return nil, false, fmt.Errorf("adding the fw_cfg entries to %s: %w", dom.Name, err)
	}
	old = append(old, replaced...)
	if err := withRecipe(ed, dom.InactiveXML, el, false); err != nil {
		return nil, false, fmt.Errorf("recording the payload recipe in %s: %w", dom.Name, err)
	}
	x, err := ed.XML()
	if err != nil {
		return nil, false, fmt.Errorf("adding the fw_cfg entries to %s: %w", dom.Name, err)
	}
	if x != dom.InactiveXML {
		if err := libvirtx.Redefine(ctx, e.Host, x); err != nil {
			return nil, false, fmt.Errorf("redefining %s with the fw_cfg entries: %w", dom.Name, err)
		}
	}
	return old, x != dom.InactiveXML, nil
}
