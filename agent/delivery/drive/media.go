// Media change: giving a running domain a new payload image through its
// existing CD-ROM (update-device), waiting for the tray to settle, resetting
// a guest whose firmware holds the tray, and replacing the drive where a
// change cannot be made (SCSI hot-plug).

package drive

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// livePayload reads the payload drive of running domain dom from its live
// definition.
func (d *Delivery) livePayload(ctx context.Context, dom libvirtx.DomainInfo) (domxml.PayloadDisk, bool, error) {
	p, found, err := d.liveDrive(ctx, dom.UUID)
	if err != nil {
		return domxml.PayloadDisk{}, false, fmt.Errorf("reading the live definition of %s: %w", dom.Name, err)
	}
	return p, found, nil
}

// liveDrive reads the payload drive of running domain uuid from its live
// definition; errors are unwrapped.
func (d *Delivery) liveDrive(ctx context.Context, uuid string) (domxml.PayloadDisk, bool, error) {
	x, err := d.env.Host.LiveXML(ctx, uuid)
	if err != nil {
		return domxml.PayloadDisk{}, false, err
	}
	return domxml.FindPayload(x)
}

// reattach puts imgPath into the payload drive live, the drive running
// domain dom still has although its persistent definition has none: a
// detach while the domain ran ejected the CD-ROM's medium and left the drive
// (IDE and SATA drives cannot be unplugged; see docs/media-change.md). Its
// medium is changed live, forced and with changeMedia's tray handling; then
// the drive goes back into the persistent definition at the same target and
// address, with p's recipe and, when p.Guest is set, the guest report
// channel. (Hot-plugging a new drive instead would clash with the live
// one's alias.)
func (d *Delivery) reattach(ctx context.Context, dom libvirtx.DomainInfo, live domxml.PayloadDisk, p *delivery.Payload, kind domxml.Kind, opts []domxml.Option) (domxml.Device, error) {
	imgPath := p.Path
	if live.Kind != domxml.KindCDROM || kind != domxml.KindCDROM {
		return live.Device, delivery.Fail(result.CodeDomainRunning, "domain %s is running and still has its payload drive %s (a %s, %s) live although its definition has none, while the job needs a %s (vfat payloads are disks, ISO payloads CD-ROMs): stop the domain, or use media iso", dom.Name, live.Target, live.Kind, live.Bus, kind)
	}
	x, err := domxml.PayloadDeviceXML(imgPath, live.Device, opts...)
	if err != nil {
		return live.Device, fmt.Errorf("rendering the payload drive of %s: %w", dom.Name, err)
	}
	if err := d.changeMedia(ctx, dom, live, x, 0, false); err != nil {
		return live.Device, fmt.Errorf("changing the payload medium of running domain %s (drive %s, left live by a detach): %w", dom.Name, live.Target, err)
	}
	cur, err := d.env.Host.Domain(ctx, dom.UUID)
	if err != nil {
		return live.Device, fmt.Errorf("reading the definition of %s to put the payload drive back: %w", dom.Name, err)
	}
	ed, err := domxml.NewEdit(cur.InactiveXML)
	if err != nil {
		return live.Device, fmt.Errorf("putting the payload drive %s back into the definition of %s: %w", live.Target, dom.Name, err)
	}
	dev, _, err := ed.SetPayloadDrive(imgPath, domxml.BusAuto, append(opts, domxml.AtDevice(live.Device))...)
	if err != nil {
		return live.Device, fmt.Errorf("putting the payload drive %s back into the definition of %s: %w", live.Target, dom.Name, err)
	}
	if err = p.DropOthersFrom(ed); err != nil {
		return dev, err
	}
	if err = delivery.WithRecipe(ed, cur.InactiveXML, p.Recipe, p.Guest); err != nil {
		return dev, fmt.Errorf("recording the payload recipe in %s: %w", dom.Name, err)
	}
	xml, err := ed.XML()
	if err != nil {
		return dev, fmt.Errorf("putting the payload drive %s back into the definition of %s: %w", live.Target, dom.Name, err)
	}
	if err := libvirtx.Redefine(ctx, d.env.Host, xml); err != nil {
		return dev, fmt.Errorf("redefining %s with the payload drive: %w", dom.Name, err)
	}
	if err := delivery.RecordLiveRecipe(ctx, d.env.Host, dom, p.Recipe); err != nil {
		return dev, err
	}
	d.env.Logger().Info("reused the payload drive left in the running domain by a detach", "domain", dom.Name, "target", live.Target, "bus", live.Bus)
	return dev, nil
}

// changeMedia swaps the medium of the running domain's payload drive,
// forced (DOMAIN_DEVICE_MODIFY_FORCE). A guest resetting the drive during
// libvirt's tray sequence leaves libvirt's tray record stale
// (docs/media-change.md has the race): after a failure a stale drive on a
// hot-pluggable bus is replaced, one on IDE/SATA is repaired by a reset
// while the domain started less than ResetWindow ago (else the job fails
// with media_locked), and the change is retried; after an insertion into
// an IDE/SATA drive settleTray waits for the tray to be recorded shut.
//
// config is DOMAIN_DEVICE_MODIFY_CONFIG when the persistent definition has
// the drive too (it changes with the live one), else 0. eject is set when
// newDisk has no medium (nothing is inserted, so there is no tray to settle).
func (d *Delivery) changeMedia(ctx context.Context, dom libvirtx.DomainInfo, cur domxml.PayloadDisk, newDisk string, config libvirtx.DomainDeviceModifyFlags, eject bool) error {
	wait := d.env.TrayWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	flags := libvirtx.DOMAIN_DEVICE_MODIFY_LIVE | config | libvirtx.DOMAIN_DEVICE_MODIFY_FORCE
	deadline := time.Now().Add(wait)
	resets := 0
	var err error
	for i := 1; ; i++ {
		err = d.env.Host.UpdateDevice(ctx, dom.UUID, newDisk, flags)
		if err == nil && !eject && !cur.Bus.Hotpluggable() {
			return d.settleTray(ctx, dom, cur, resets)
		}
		if err == nil || !libvirtx.IsTrayBusy(err) {
			return err
		}
		stale, lerr := d.staleTray(ctx, dom.UUID)
		if lerr != nil {
			return fmt.Errorf("%w (and reading the live definition: %v)", err, lerr)
		}
		if stale && cur.Bus.Hotpluggable() {
			return d.replaceDrive(ctx, dom, cur, newDisk, config, err)
		}
		if stale {
			up, known := d.startedAgo(ctx, dom.UUID)
			if !known || up > d.resetWindow() || resets >= MaxResets {
				return &delivery.Failure{Code: result.CodeMediaLocked, Err: fmt.Errorf("libvirt's record of payload drive %s (%s) says its tray is open while QEMU's is closed (the guest reset the drive during a media change), so libvirt cannot change its medium until it re-reads the drive: reset or restart the domain (virsh reset %s), then resubmit: %w", cur.Target, cur.Bus, dom.Name, err)}
			}
			resets++
			d.env.Metrics.MediaRecovery(metrics.RecoveryReset)
			d.env.Logger().Warn("payload drive tray out of step between libvirt and QEMU right after start; resetting the domain so libvirt re-reads it", "domain", dom.Name, "up", up.Round(time.Millisecond), "reset", resets)
			if rerr := d.env.Host.Reset(ctx, dom.UUID); rerr != nil {
				return fmt.Errorf("%w (and resetting the domain to repair the drive: %v)", err, rerr)
			}
			d.noteStart(dom.UUID)
			deadline = time.Now().Add(wait)
		}
		pause := min(time.Duration(i)*250*time.Millisecond, 2*time.Second)
		if time.Now().Add(pause).After(deadline) {
			break
		}
		d.env.Logger().Info("payload drive tray busy; retrying the media change", "domain", dom.Name, "attempt", i)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
	if cur.Bus.Hotpluggable() {
		return d.replaceDrive(ctx, dom, cur, newDisk, config, err)
	}
	return &delivery.Failure{Code: result.CodeMediaLocked, Err: fmt.Errorf("the guest kept the tray of payload drive %s (%s) locked shut for %s although the change was forced; stop the domain, then resubmit: %w", cur.Target, cur.Bus, wait, err)}
}

// settleTray waits up to trayCloseWait (or TrayWait, when shorter) for libvirt to record the tray of
// the IDE/SATA payload drive cur shut after a medium was inserted, and
// repairs a record that stays open (see changeMedia): within ResetWindow of
// the start, and with fewer than MaxResets resets done by this change, the
// domain is reset, which makes libvirt read the drive's state again (the new
// medium stays in). Later in the domain's life it is not reset behind the
// operator's back: the change stands (the medium is in) and a warning says
// that the next change needs a reset.
func (d *Delivery) settleTray(ctx context.Context, dom libvirtx.DomainInfo, cur domxml.PayloadDisk, resets int) error {
	wait := trayCloseWait
	if d.env.TrayWait > 0 && d.env.TrayWait < wait {
		wait = d.env.TrayWait
	}
	for {
		deadline := time.Now().Add(wait)
		for {
			stale, err := d.staleTray(ctx, dom.UUID)
			if err != nil {
				return fmt.Errorf("reading the live definition of %s after the media change: %w", dom.Name, err)
			}
			if !stale {
				return nil
			}
			if !time.Now().Before(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(trayPoll):
			}
		}
		up, known := d.startedAgo(ctx, dom.UUID)
		if !known || up > d.resetWindow() || resets >= MaxResets {
			d.env.Logger().Warn("libvirt still records the payload drive's tray as open after the media change (the guest reset the drive during it); the new medium is in, but the next change needs a reset of the domain (virsh reset)",
				"domain", dom.Name, "target", cur.Target, "bus", cur.Bus)
			return nil
		}
		resets++
		d.env.Metrics.MediaRecovery(metrics.RecoveryReset)
		d.env.Logger().Warn("payload drive tray out of step between libvirt and QEMU after a media change right after start; resetting the domain so libvirt re-reads it", "domain", dom.Name, "up", up.Round(time.Millisecond), "reset", resets)
		if err := d.env.Host.Reset(ctx, dom.UUID); err != nil {
			return fmt.Errorf("resetting %s to repair libvirt's record of the payload drive's tray: %w", dom.Name, err)
		}
		d.noteStart(dom.UUID)
	}
}

// trayCloseWait bounds settleTray's wait for libvirt to record a closed
// tray (QEMU's DEVICE_TRAY_MOVED event usually arrives within milliseconds),
// trayPoll is how often it looks.
const (
	trayCloseWait = 3 * time.Second
	trayPoll      = 50 * time.Millisecond
)

// startedAgo is how long ago domain uuid started. A domain started a moment
// ago (e.g. by virsh) may have its start event still on the way to the
// agent's event loop: an unknown start is waited for up to startEventWait.
func (d *Delivery) startedAgo(ctx context.Context, uuid string) (time.Duration, bool) {
	if d.env.Starts == nil {
		return 0, false
	}
	deadline := time.Now().Add(startEventWait)
	for {
		up, known := d.env.Starts.Since(uuid)
		if known || !time.Now().Before(deadline) {
			return up, known
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startEventWait bounds the wait for a domain's start event (startedAgo).
const startEventWait = 3 * time.Second

// MaxResets bounds the resets one media change may do (each reset restarts
// the firmware's probing, which can race the change again).
const MaxResets = 3

func (d *Delivery) resetWindow() time.Duration {
	if d.env.ResetWindow > 0 {
		return d.env.ResetWindow
	}
	return 60 * time.Second
}

// staleTray reports whether libvirt's live definition says the payload
// drive's tray is open: after a refused forced change that means libvirt's
// record is out of step with QEMU's closed tray.
func (d *Delivery) staleTray(ctx context.Context, uuid string) (bool, error) {
	p, found, err := d.liveDrive(ctx, uuid)
	return found && p.TrayOpen, err
}

// replaceDrive swaps a hot-pluggable payload drive whose medium cannot be
// changed for a new drive holding the new medium; cause is why.
func (d *Delivery) replaceDrive(ctx context.Context, dom libvirtx.DomainInfo, cur domxml.PayloadDisk, newDisk string, config libvirtx.DomainDeviceModifyFlags, cause error) error {
	oldDisk, perr := domxml.PayloadDeviceXML(cur.Path, cur.Device, d.env.Opts...)
	if cur.Path == "" {
		oldDisk, perr = domxml.PayloadDeviceXML(filepath.Join(d.env.PayloadDir, "empty"), cur.Device, d.env.Opts...)
	}
	if perr != nil {
		return fmt.Errorf("%w (and rendering the drive to replace it: %v)", cause, perr)
	}
	d.env.Metrics.MediaRecovery(metrics.RecoveryReplace)
	flags := libvirtx.DOMAIN_DEVICE_MODIFY_LIVE | config
	if derr := d.env.Host.DetachDevice(ctx, dom.UUID, oldDisk, flags); derr != nil {
		return fmt.Errorf("%w (replacing the drive: detach: %v)", cause, derr)
	}
	if aerr := d.env.Host.AttachDevice(ctx, dom.UUID, newDisk, flags); aerr != nil {
		return fmt.Errorf("replacing the payload drive: the old drive was detached but attaching the new one failed: %w", aerr)
	}
	d.env.Logger().Info("replaced the payload drive (its medium could not be changed)", "domain", dom.Name, "cause", cause)
	return nil
}

// noteStart records that domain uuid (re)started now.
func (d *Delivery) noteStart(uuid string) {
	if d.env.Starts != nil {
		d.env.Starts.Note(uuid, time.Now())
	}
}

func hasSCSI(doc *domxml.Document) bool {
	d, err := doc.ChooseDevice(domxml.BusAuto)
	return err == nil && d.Bus == domxml.BusSCSI
}
