// Package delivery is how a payload reaches a domain's guest: an image in a
// drive (package drive), files behind QEMU's fw_cfg (package fwcfg), and
// — next — strings in the domain's SMBIOS table. The engine builds the
// payload's files and its recipe, then attaches, detaches and supersedes
// through the job's Delivery; registry.go names them.
//
// A domain carries one payload: a delivery that attaches takes the
// payload of every other delivery out of the definition (Payload.DropOthers)
// and the engine removes their files once the job succeeded (Files).
package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// Delivery is one way of giving a domain its payload.
type Delivery interface {
	// Name is the delivery's registry name ("drive", "fwcfg").
	Name() string
	// Attach gives dom the payload p: it edits the persistent definition
	// (and, for a running domain, what libvirt can change live), records
	// p.Recipe, drops the other deliveries' payloads (p.DropOthers), and
	// starts a stopped domain when p.Start is set. It fills in r's domain
	// state, device or fw_cfg names and, when the guest sees the payload
	// only later, TakesEffect and Notice. The files it replaced are the
	// caller's to remove (Attached).
	Attach(ctx context.Context, dom libvirtx.DomainInfo, p *Payload, r *result.Result) (Attached, error)
	// Files returns the payload files this delivery's entries in
	// domainXML name: those vmpayload wrote (files in the payload
	// directory), never a user's own.
	Files(domainXML string) []string
	// Drop removes this delivery's payload from ed, the definition of dom,
	// because another delivery's payload takes its place (one payload per
	// domain). Nothing live changes; the files go after the job (Files).
	Drop(ed *domxml.Edit, dom libvirtx.DomainInfo) error
	// Detach removes this delivery's payload from dom: live changes at
	// once, its entries from ed, the definition the caller then records
	// without the recipe and the guest report channel.
	Detach(ctx context.Context, dom libvirtx.DomainInfo, ed *domxml.Edit, r *result.Result) (Detached, error)
}

// Payload is what a job attaches: the files the engine built (or copied)
// into the payload directory and what goes with them into the definition.
// A delivery without files (SMBIOS strings) has neither Path nor Named.
type Payload struct {
	// Path is the payload file whose recipe Recipe is: the image a drive
	// holds, the file fw_cfg entries name.
	Path string
	// Named are the files the guest finds under names (fw_cfg names);
	// empty for a drive.
	Named []Named
	// Values are what a delivery without files writes into the
	// definition itself (SMBIOS OEM strings of systemd credentials).
	Values []domxml.Credential
	// Drive is the drive an image goes into (delivery "drive").
	Drive Drive
	// Recipe is the recipe element recorded in the definition; "" records
	// none (and removes an old one).
	Recipe string
	// Guest adds the guest report channel (else it is removed).
	Guest bool
	// Start starts a stopped domain after the attach.
	Start bool
	// DropOthers takes every other delivery's payload out of an edited
	// definition of the domain (Delivery.Drop of each); set by the engine.
	DropOthers func(ed *domxml.Edit) error
}

// DropOthersFrom calls p.DropOthers on ed, when it is set.
func (p *Payload) DropOthersFrom(ed *domxml.Edit) error {
	if p.DropOthers == nil {
		return nil
	}
	return p.DropOthers(ed)
}

// Named is a payload file under the name the guest reads it by.
type Named struct {
	Name string
	File string
}

// Names returns the names of ns, in order.
func Names(ns []Named) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}

// Drive is the kind of drive an image goes into.
type Drive int

const (
	// DriveCDROM is a read-only CD-ROM on the configured bus (ISO images);
	// a running domain's medium can change.
	DriveCDROM Drive = iota
	// DriveDisk is a read-only disk (vfat images): the configured bus when
	// disks can use it, else libvirt's choice.
	DriveDisk
	// DriveFloppy is a floppy drive (fdc), set in a stopped domain only.
	DriveFloppy
	// DriveSerialDisk is a read-only raw virtio disk with serial
	// "ignition", what Ignition's qemu platform reads on s390x and
	// ppc64le (/dev/disk/by-id/virtio-ignition).
	DriveSerialDisk
)

// Attached is what an attach replaced. The engine removes the files once
// the job succeeded, except the one the payload now is.
type Attached struct {
	// Remove are files of the delivery's earlier payload the running QEMU
	// no longer holds (a changed medium): removed unless a shut-off
	// domain's managed save resumes with them.
	Remove []string
	// Supersede are files the definition no longer names that a running
	// QEMU may still have been started with: removed, or when the domain
	// stops (see Live).
	Supersede []string
	// Live is the running domain's live definition when the attach read
	// it, nil otherwise.
	Live *Live
	// Seen reports that the running guest has this very payload already
	// (a re-submitted job): nothing reaches it later.
	Seen bool
}

// Detached is what a detach took out of the definition.
type Detached struct {
	// Changed reports that ed changed.
	Changed bool
	// Drive reports that a drive left the definition: messages name the
	// payload drive, and a running domain's live recipe is cleared.
	Drive bool
	// Remove are files to remove after the redefine (the medium is out).
	Remove []string
	// Supersede are files the running QEMU may still have been started
	// with (see Attached.Supersede).
	Supersede []string
	// Live is the running domain's live definition when the detach read
	// it, nil otherwise.
	Live *Live
	// TakesEffect and Notice go into the result once the detach is done
	// ("" when the guest sees the detach at once).
	TakesEffect, Notice string
}

// Env is what the engine lends its deliveries: the host, the payload
// directory and drive settings, and the services it keeps (start, clock of
// domain starts, metrics, log).
type Env struct {
	Host       libvirtx.Host
	PayloadDir string
	// Bus is the configured bus of the payload CD-ROM.
	Bus domxml.Bus
	// Opts are the options every payload drive is rendered with.
	Opts    []domxml.Option
	Log     *slog.Logger
	Metrics *metrics.Agent
	// TrayWait, ResetWindow: see engine.Engine.
	TrayWait, ResetWindow time.Duration
	// Starts knows when domains started; nil knows nothing.
	Starts Starts
	// Start starts the stopped domain dom whose persistent definition the
	// job changed (changed), putting the definition back when the start
	// fails.
	Start func(ctx context.Context, dom libvirtx.DomainInfo, changed bool) error
}

// Logger returns e.Log, or slog's default when it is nil.
func (e *Env) Logger() *slog.Logger {
	if e.Log == nil {
		return slog.Default()
	}
	return e.Log
}

// Starts records when domains started (engine.Starts).
type Starts interface {
	Note(uuid string, t time.Time)
	Since(uuid string) (time.Duration, bool)
}

// Owns reports whether path is a file vmpayload manages: one directly in
// the payload directory dir.
func Owns(dir, path string) bool {
	if path == "" || dir == "" {
		return false
	}
	return filepath.Dir(filepath.Clean(path)) == filepath.Clean(dir)
}

// Failure is an error with the result code (and the job field) it maps to.
type Failure struct {
	Code, Field string
	Err         error
}

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// Fail returns a Failure with code and the formatted error.
func Fail(code string, format string, args ...any) error {
	return &Failure{Code: code, Err: fmt.Errorf(format, args...)}
}
