// Ignition jobs beyond fw_cfg on x86 (issue 41): the delivery chosen by
// the domain's architecture, the deliveries a domain cannot read refused
// by name, and the notice of a job for a guest that has booted before.
// Also the start of a stopped domain, which puts the definition back when
// QEMU refuses to start.

package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/vmpayload/vmpayload/agent/delivery/fwcfg"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// NoticeIgnitionFirstBoot is the result's notice of an Ignition job for a
// domain that has run before (see hasRun): Ignition applies a config only
// on a guest's first boot. The fw_cfg variant of a running domain is
// fwcfg.NoticeNextColdStart followed by it.
const NoticeIgnitionFirstBoot = "Ignition applies a config only on a guest's first boot, and this domain has run before, so its guest will not apply this config when it boots again: to have it applied, reprovision the guest so that its next boot is a first boot (a fresh copy of its disk image, or recreate the VM; the payload stays in the definition for that boot), or give the change in a payload the guest reads on every boot instead of through Ignition"

// ignitionDelivery decides the delivery of the Ignition job j for dom: a
// job that names none (defaulted) gets "blockdev" on s390x and
// ppc64/ppc64le, where QEMU has no fw_cfg, and keeps "fwcfg" elsewhere;
// rendered is then rendered again. A delivery the domain cannot read is
// refused by name: fw_cfg on s390x/ppc64 (the start fails with "fw_cfg
// device not available"), and fw_cfg on an x86 domain without ACPI (the
// guest kernel's qemu_fw_cfg driver binds through ACPI, so the guest boots
// without the config).
func (e *Engine) ignitionDelivery(dom libvirtx.DomainInfo, j *job.Job, rendered *payload.Rendered, defaulted bool) (*payload.Rendered, error) {
	doc, err := domxml.Read(dom.InactiveXML)
	if err != nil {
		return nil, fmt.Errorf("reading the definition of %s: %w", dom.Name, err)
	}
	plat := doc.Platform()
	d, reach := rendered.Job.IgnitionDelivery, fwcfg.ReachOf(plat)
	if defaulted && d == job.DeliveryFwCfg && reach == fwcfg.NoDevice {
		jb := *j
		jb.IgnitionDelivery = job.DeliveryBlockdev
		checked, rep := payload.CheckJob(&jb, e.CheckOptions())
		if !rep.OK() {
			return nil, rep.Err()
		}
		return payload.Render(checked, payload.Options{})
	}
	if d != job.DeliveryFwCfg {
		return rendered, nil
	}
	switch reach {
	case fwcfg.NoDevice:
		return nil, &failure{Code: result.CodeInvalidJob, Field: "ignition_delivery", Err: fmt.Errorf(
			"ignition_delivery \"fwcfg\" cannot reach domain %s: its architecture is %s, where QEMU has no fw_cfg device (the start fails with \"fw_cfg device not available\") and Ignition's qemu platform reads its config from a virtio disk with serial \"ignition\"; use \"blockdev\" (the default there)",
			dom.Name, plat.Arch)}
	case fwcfg.NoACPI:
		return nil, &failure{Code: result.CodeInvalidJob, Field: "ignition_delivery", Err: fmt.Errorf(
			"ignition_delivery \"fwcfg\" cannot reach the guest of domain %s: on x86 the guest kernel's qemu_fw_cfg driver binds through ACPI (device QEMU0002) and the domain has no <features><acpi/>, so the guest would boot without the config (Ignition logs \"QEMU firmware config was not found\"); add <acpi/> to the domain's <features>, or use \"configdrive\" or \"nocloud\" if the image's Ignition platform reads them",
			dom.Name)}
	}
	return rendered, nil
}

// hasRun reports whether the domain's guest has booted before, by what
// libvirt shows: the domain is running (or paused), or it has a managed
// save image (its next start resumes a guest that booted). libvirt keeps
// no record of earlier runs of a shut-off domain, so a domain that was
// started once and shut down is not known to have run (docs/ignition.md).
func (e *Engine) hasRun(ctx context.Context, dom libvirtx.DomainInfo) bool {
	if dom.Active {
		return true
	}
	saved, err := e.Host.SavedXML(ctx, dom.UUID)
	return err == nil && saved != ""
}

// firstBootNotice adds NoticeIgnitionFirstBoot to the result of an
// Ignition job done for a domain that has run before. A job whose running
// guest has this very config already (seen: a re-submitted fw_cfg job for
// a domain started with it) changed nothing the guest sees and gets none.
func (e *Engine) firstBootNotice(ctx context.Context, dom libvirtx.DomainInfo, seen bool, r *result.Result) {
	if seen || !e.hasRun(ctx, dom) {
		return
	}
	if r.Notice != "" {
		r.Notice += "; but " + NoticeIgnitionFirstBoot
		return
	}
	r.Notice = NoticeIgnitionFirstBoot
}

// start starts the stopped domain dom, whose persistent definition the job
// changed (changed) from dom.InactiveXML. When the start fails (QEMU or
// libvirt refuses it), the definition is put back as it was before the
// job: no drive, fw_cfg entry or recipe of a payload the guest never saw
// stays, and the caller removes the payload file no definition names
// (dropUnattached).
func (e *Engine) start(ctx context.Context, dom libvirtx.DomainInfo, changed bool) error {
	err := e.Host.Start(ctx, dom.UUID)
	if err == nil {
		e.Starts.Note(dom.UUID, time.Now())
		return nil
	}
	err = fmt.Errorf("starting %s: %w", dom.Name, err)
	if !changed {
		return err
	}
	if rerr := libvirtx.Redefine(ctx, e.Host, dom.InactiveXML); rerr != nil {
		e.log().Warn("the start failed and putting the definition back as it was before the job failed too", "domain", dom.Name, "err", rerr)
		return fmt.Errorf("%w (putting the definition back as it was before the job failed too: %v)", err, rerr)
	}
	e.log().Info("the start failed: the definition is back as it was before the job", "domain", dom.Name, "err", err)
	return fmt.Errorf("%w (the definition is back as it was before the job)", err)
}
