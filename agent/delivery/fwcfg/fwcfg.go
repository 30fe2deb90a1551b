// Package fwcfg delivers a payload as files behind QEMU's firmware
// configuration device: each file lives in the payload directory like an
// image, and the domain's persistent definition names it in a
// <sysinfo type='fwcfg'> entry, under the name the guest reads it by
// (/sys/firmware/qemu_fw_cfg/by_name/NAME/raw). Ignition's config is one
// file under both of Ignition's names (issue 34); a payload may be a set
// of files, one per name. QEMU reads the files when it starts: a running
// domain's guest sees a change at its next cold start.
package fwcfg

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// Name is the delivery's registry name.
const Name = "fwcfg"

// NoticeNextColdStart is the result's notice of a fw_cfg job done on a
// running domain.
const NoticeNextColdStart = "the domain is running and QEMU reads fw_cfg only when it starts: the persistent definition and the config file were updated, and the new file reaches the guest only at its next cold start (shut down and started again; a reboot inside the guest or `virsh reboot` keeps the file QEMU read at launch)"

// NoticeDetachRunning is the result's notice of a detach that removed the
// fw_cfg entries of a running domain.
const NoticeDetachRunning = "the domain is running and QEMU reads fw_cfg only when it starts: the fw_cfg entries left the persistent definition and the config file was removed, and the guest keeps the copy QEMU read at launch until its next cold start"

// Managed reports whether name is a fw_cfg name vmpayload delivers payload
// files under: Ignition's names (domxml.IgnitionFwCfgNames) and systemd's
// credentials (under domxml.CredentialFwCfgPrefix). An entry of such a
// name whose file is in the payload directory is vmpayload's; entries a
// user wrote by hand elsewhere are never touched. A kind that delivers
// files under other names adds them here.
func Managed(name string) bool {
	return domxml.IsIgnitionFwCfg(name) || strings.HasPrefix(name, domxml.CredentialFwCfgPrefix)
}

// Delivery is the fw_cfg delivery of an engine.
type Delivery struct{ env *delivery.Env }

// New returns the fw_cfg delivery for env.
func New(env *delivery.Env) delivery.Delivery { return &Delivery{env: env} }

// Name returns "fwcfg".
func (*Delivery) Name() string { return Name }

// owns reports whether en is an entry vmpayload wrote: a managed name and
// a file in the payload directory.
func (d *Delivery) owns(en domxml.FwCfgEntry) bool {
	return Managed(en.Name) && delivery.Owns(d.env.PayloadDir, en.File)
}

// Files returns the files of the fw_cfg entries vmpayload wrote into
// domainXML.
func (d *Delivery) Files(domainXML string) []string {
	ents, err := domxml.FwCfgEntries(domainXML)
	if err != nil {
		return nil
	}
	return d.files(ents)
}

func (d *Delivery) files(ents []domxml.FwCfgEntry) []string {
	var out []string
	for _, en := range ents {
		if d.owns(en) && !slices.Contains(out, en.File) {
			out = append(out, en.File)
		}
	}
	return out
}

// Drop removes the fw_cfg entries vmpayload wrote from ed: another
// delivery's payload replaces them.
func (d *Delivery) Drop(ed *domxml.Edit, _ libvirtx.DomainInfo) error {
	ed.RemoveFwCfgEntries(d.owns)
	return nil
}

// Attach puts the fw_cfg entries of p.Named and the recipe p.Recipe into
// dom's persistent definition, taking out the other deliveries' payloads
// and the guest report channel, in one redefine. A stopped domain is
// started when p.Start is set (a failed start puts the definition back:
// Env.Start). A running domain keeps what its QEMU read at launch: the
// result says the files reach the guest at its next cold start
// (result.TakesEffectNextColdStart), unless the running QEMU was started
// with these very entries (Attached.Seen).
func (d *Delivery) Attach(ctx context.Context, dom libvirtx.DomainInfo, p *delivery.Payload, r *result.Result) (delivery.Attached, error) {
	replaced, changed, err := d.define(ctx, dom, p)
	if err == nil && !dom.Active && p.Start {
		err = d.env.Start(ctx, dom, changed)
	}
	if err != nil {
		return delivery.Attached{}, err
	}
	r.FwCfg = delivery.Names(p.Named)
	var out delivery.Attached
	if dom.Active {
		r.DomainState = "running"
		out.Live = d.env.ReadLive(ctx, dom)
		if out.Seen = StartedWith(out.Live, p.Named); !out.Seen {
			r.TakesEffect, r.Notice = result.TakesEffectNextColdStart, NoticeNextColdStart
		}
	} else {
		r.DomainState = "shut off"
		if p.Start {
			r.DomainState = "running"
		}
	}
	for _, f := range replaced {
		if !slices.ContainsFunc(p.Named, func(n delivery.Named) bool { return n.File == f }) {
			out.Supersede = append(out.Supersede, f)
		}
	}
	return out, nil
}

// define puts p's entries and recipe into dom's persistent definition and
// redefines it when that changed anything. It returns the files the
// definition's fw_cfg entries named before and no longer do, and whether
// it redefined the domain.
func (d *Delivery) define(ctx context.Context, dom libvirtx.DomainInfo, p *delivery.Payload) ([]string, bool, error) {
	ed, err := domxml.NewEdit(dom.InactiveXML)
	if err != nil {
		return nil, false, fmt.Errorf("reading the definition of %s: %w", dom.Name, err)
	}
	if err := p.DropOthersFrom(ed); err != nil {
		return nil, false, err
	}
	// vmpayload's entries of names the payload no longer has (an earlier
	// payload's set) go; those it has are replaced in place. A credential
	// the user passes in an entry of their own is not replaced: the job is
	// refused (systemd would take one of the two).
	want := delivery.Names(p.Named)
	for _, en := range ed.FwCfgEntries() {
		if strings.HasPrefix(en.Name, domxml.CredentialFwCfgPrefix) && slices.Contains(want, en.Name) && !d.owns(en) {
			return nil, false, &delivery.Failure{Code: result.CodeInvalidJob, Field: "credentials_delivery", Err: fmt.Errorf(
				"domain %s already passes credential %q in an fw_cfg entry of its own (file %s); remove it or leave the credential out of the job",
				dom.Name, strings.TrimPrefix(en.Name, domxml.CredentialFwCfgPrefix), en.File)}
		}
	}
	gone := ed.RemoveFwCfgEntries(func(en domxml.FwCfgEntry) bool { return d.owns(en) && !slices.Contains(want, en.Name) })
	replaced := d.files(gone)
	for _, g := range groups(p.Named) {
		r, err := ed.SetFwCfgFile(g.file, g.names...)
		if err != nil {
			return nil, false, fmt.Errorf("adding the fw_cfg entries to %s: %w", dom.Name, err)
		}
		for _, f := range r {
			if !slices.Contains(replaced, f) {
				replaced = append(replaced, f)
			}
		}
	}
	if err := delivery.WithRecipe(ed, dom.InactiveXML, p.Recipe, false); err != nil {
		return nil, false, fmt.Errorf("recording the payload recipe in %s: %w", dom.Name, err)
	}
	x, err := ed.XML()
	if err != nil {
		return nil, false, fmt.Errorf("adding the fw_cfg entries to %s: %w", dom.Name, err)
	}
	if x != dom.InactiveXML {
		if err := libvirtx.Redefine(ctx, d.env.Host, x); err != nil {
			return nil, false, fmt.Errorf("redefining %s with the fw_cfg entries: %w", dom.Name, err)
		}
	}
	return replaced, x != dom.InactiveXML, nil
}

// group is the names one file goes under.
type group struct {
	file  string
	names []string
}

// groups gathers ns by file, in the order the files first appear.
func groups(ns []delivery.Named) []group {
	var out []group
	for _, n := range ns {
		i := slices.IndexFunc(out, func(g group) bool { return g.file == n.File })
		if i < 0 {
			out = append(out, group{file: n.File})
			i = len(out) - 1
		}
		out[i].names = append(out[i].names, n.Name)
	}
	return out
}

// StartedWith reports whether the running QEMU was started with exactly
// the entries ns among the managed names (a re-submitted job): its guest
// sees that payload already. An unread live definition: no.
func StartedWith(l *delivery.Live, ns []delivery.Named) bool {
	n := 0
	for _, en := range l.FwCfg {
		if !Managed(en.Name) {
			continue
		}
		i := slices.IndexFunc(ns, func(w delivery.Named) bool { return w.Name == en.Name })
		if i < 0 || ns[i].File != en.File {
			return false
		}
		n++
	}
	return l.Known && n == len(ns)
}

// startedWithOwned reports whether the running QEMU was started with
// fw_cfg entries vmpayload wrote (an unread definition: maybe).
func (d *Delivery) startedWithOwned(l *delivery.Live) bool {
	if !l.Known {
		return true
	}
	return slices.ContainsFunc(l.FwCfg, d.owns)
}

// Detach takes the fw_cfg entries vmpayload wrote out of ed. Their files
// go after the redefine, or, when the running domain's QEMU was started
// with them, when it stops; the guest keeps the copy its QEMU read until
// its next cold start, which the result says.
func (d *Delivery) Detach(ctx context.Context, dom libvirtx.DomainInfo, ed *domxml.Edit, _ *result.Result) (delivery.Detached, error) {
	fw := ed.RemoveFwCfgEntries(d.owns)
	if len(fw) == 0 {
		return delivery.Detached{}, nil
	}
	out := delivery.Detached{Changed: true}
	for _, en := range fw {
		out.Supersede = append(out.Supersede, en.File)
	}
	if dom.Active {
		out.Live = d.env.ReadLive(ctx, dom)
		if d.startedWithOwned(out.Live) {
			out.TakesEffect, out.Notice = result.TakesEffectNextColdStart, NoticeDetachRunning
		}
	}
	return out, nil
}

// Reach is whether the guest of a domain can read fw_cfg.
type Reach int

const (
	// Reachable: QEMU has a fw_cfg device and the guest kernel finds it.
	Reachable Reach = iota
	// NoDevice: the architecture's QEMU has no fw_cfg device (s390x,
	// ppc64/ppc64le): libvirt fails the start with "fw_cfg device not
	// available".
	NoDevice
	// NoACPI: an x86 domain without <features><acpi/>: the guest kernel's
	// qemu_fw_cfg driver binds through ACPI (device QEMU0002), so the
	// guest boots without the files.
	NoACPI
)

// ReachOf says whether the guest of a domain of platform plat can read
// fw_cfg; a kind refuses a fw_cfg delivery it cannot, in its own words.
func ReachOf(plat domxml.Platform) Reach {
	switch {
	case plat.NoFwCfg():
		return NoDevice
	case plat.X86() && !plat.ACPI:
		return NoACPI
	}
	return Reachable
}
