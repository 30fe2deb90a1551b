// Package smbios delivers a payload of named values (systemd credentials)
// as SMBIOS type 11 OEM strings in the domain's persistent definition:
// <sysinfo type='smbios'><oemStrings> entries with
// <os><smbios mode='sysinfo'/> (libvirtx/domxml sysinfo.go). There are no
// files: nothing to rebuild after a host reboot, nothing to copy on a
// migration. The names vmpayload set are recorded in its recipe (the
// values of a recipe without files), which is how Drop and Detach know
// its own OEM strings from the user's. QEMU builds the SMBIOS tables when
// it starts: a running domain's guest sees a change at its next cold
// start. libvirt puts OEM strings on QEMU's command line, so no secret
// comes here (validation refuses one).
package smbios

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

// Name is the delivery's registry name.
const Name = "smbios"

// NoticeNextColdStart is the result's notice of a job done on a running
// domain.
const NoticeNextColdStart = "the domain is running and QEMU builds its SMBIOS tables only when it starts: the persistent definition was updated, and the guest reads the new credentials at its next cold start (shut down and started again; a reboot inside the guest or `virsh reboot` keeps the tables QEMU built at launch)"

// NoticeFirstBootOnly is added to the notice when the payload holds
// credentials systemd applies only on a first boot.
const NoticeFirstBootOnly = "the firstboot.* and passwd.* credentials apply only on the guest's first boot (systemd-firstboot's ConditionFirstBoot: /etc/machine-id missing or \"uninitialized\"), so a guest that has booted before ignores them"

// NoticeDetachRunning is the result's notice of a detach that removed the
// OEM strings of a running domain.
const NoticeDetachRunning = "the domain is running and QEMU builds its SMBIOS tables only when it starts: the credentials left the persistent definition, and the guest keeps those QEMU passed at launch until its next cold start"

// Delivery is the SMBIOS delivery of an engine.
type Delivery struct{ env *delivery.Env }

// New returns the SMBIOS delivery for env.
func New(env *delivery.Env) delivery.Delivery { return &Delivery{env: env} }

// Name returns "smbios".
func (*Delivery) Name() string { return Name }

// Owned returns the names of the credentials vmpayload set as OEM strings
// in the definition ed: the values without files of its recipe (none when
// it has no recipe of values, or one it cannot read).
func Owned(ed *domxml.Edit) []string {
	rc, ok, err := recipe.FromDocument(ed)
	if err != nil || !ok {
		return nil
	}
	return rc.InlineNames()
}

// Files is empty: the payload is no file.
func (*Delivery) Files(string) []string { return nil }

// Drop removes vmpayload's OEM strings from ed: another delivery's payload
// replaces them.
func (*Delivery) Drop(ed *domxml.Edit, _ libvirtx.DomainInfo) error {
	ed.RemoveSMBIOSCredentials(Owned(ed))
	return nil
}

// Attach puts p.Values as OEM strings and the recipe p.Recipe into dom's
// persistent definition, replacing the OEM strings vmpayload set before and
// taking out the other deliveries' payloads, in one redefine; a stopped
// domain is started when p.Start is set. A refused edit (the user's own
// OEM string of a name the job sets, a <smbios mode> other than sysinfo,
// no room left in the SMBIOS table) fails the job naming
// credentials_delivery; the definition is left as it was.
func (d *Delivery) Attach(ctx context.Context, dom libvirtx.DomainInfo, p *delivery.Payload, r *result.Result) (delivery.Attached, error) {
	ed, err := domxml.NewEdit(dom.InactiveXML)
	if err != nil {
		return delivery.Attached{}, fmt.Errorf("reading the definition of %s: %w", dom.Name, err)
	}
	owned := Owned(ed)
	if err := p.DropOthersFrom(ed); err != nil {
		return delivery.Attached{}, err
	}
	if err := ed.SetSMBIOSCredentials(p.Values, owned); err != nil {
		return delivery.Attached{}, &delivery.Failure{Code: result.CodeInvalidJob, Field: "credentials_delivery",
			Err: fmt.Errorf("domain %s: %w", dom.Name, err)}
	}
	if err := delivery.WithRecipe(ed, dom.InactiveXML, p.Recipe, p.Guest); err != nil {
		return delivery.Attached{}, fmt.Errorf("recording the payload recipe in %s: %w", dom.Name, err)
	}
	x, err := ed.XML()
	if err != nil {
		return delivery.Attached{}, fmt.Errorf("adding the SMBIOS credentials to %s: %w", dom.Name, err)
	}
	changed := x != dom.InactiveXML
	if changed {
		if err := libvirtx.Redefine(ctx, d.env.Host, x); err != nil {
			return delivery.Attached{}, fmt.Errorf("redefining %s with the SMBIOS credentials: %w", dom.Name, err)
		}
	}
	if !dom.Active && p.Start {
		if err := d.env.Start(ctx, dom, changed); err != nil {
			return delivery.Attached{}, err
		}
	}
	var out delivery.Attached
	switch {
	case dom.Active:
		r.DomainState = "running"
		out.Live = d.env.ReadLive(ctx, dom)
		if changed {
			r.TakesEffect, r.Notice = result.TakesEffectNextColdStart, NoticeNextColdStart
			if slices.ContainsFunc(p.Values, func(v domxml.Credential) bool { return FirstBootOnly([]string{v.Name}) }) {
				r.Notice += "; " + NoticeFirstBootOnly
			}
		} else {
			out.Seen = true
		}
	case p.Start:
		r.DomainState = "running"
	default:
		r.DomainState = "shut off"
	}
	return out, nil
}

// FirstBootOnly reports whether names holds a credential systemd applies
// only on a first boot (firstboot.*, passwd.*).
func FirstBootOnly(names []string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "firstboot.") || strings.HasPrefix(n, "passwd.") })
}

// Detach takes vmpayload's OEM strings out of ed (the caller removes the
// recipe that names them).
func (d *Delivery) Detach(_ context.Context, dom libvirtx.DomainInfo, ed *domxml.Edit, _ *result.Result) (delivery.Detached, error) {
	if len(ed.RemoveSMBIOSCredentials(Owned(ed))) == 0 {
		return delivery.Detached{}, nil
	}
	out := delivery.Detached{Changed: true}
	if dom.Active {
		out.TakesEffect, out.Notice = result.TakesEffectNextColdStart, NoticeDetachRunning
	}
	return out, nil
}
