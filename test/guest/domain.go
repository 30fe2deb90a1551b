package guest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// DefaultURI is the libvirt connection the harness uses.
const DefaultURI = "qemu:///system"

// NamePrefix starts every domain name the harness invents. Other engineers'
// test domains use other prefixes; Cleanup never touches names it did not
// create.
const NamePrefix = "vmpx-e2e-"

// CD-ROM buses for Options.CDROMBus and CDROMXML.
const (
	// BusIDE is the PIIX IDE bus of machine "pc" (absent on q35).
	BusIDE = "ide"
	// BusSATA is the AHCI bus; the only CD-ROM bus built into q35.
	BusSATA = "sata"
	// BusSCSI is a virtio-scsi controller (every domain gets one).
	BusSCSI = "scsi"
)

// NIC is one network interface of the guest.
type NIC struct {
	// MAC is the guest-visible address, e.g. 52:54:00:12:34:56.
	MAC string
	// Model is the device model; default virtio.
	Model string
}

// Options describe a guest.
type Options struct {
	// Name is the libvirt domain name; default NamePrefix + random hex.
	Name string
	// Dir holds the overlay and serial log. Default: a fresh directory under
	// /var/tmp/vmpayload-e2e, removed by Cleanup. A given Dir is kept; its
	// ancestors get o+x so libvirt-qemu can traverse them.
	Dir string
	// Machine is "pc" (default) or "q35".
	Machine string
	// VCPUs defaults to 1: with two, QEMU's multi-threaded TCG (Debian 12's
	// QEMU 7.2) can run a stale translation of kernel text that another
	// vCPU has just patched, and the guest dies at boot ("Oops: int3" in
	// hrtimer_start_range_ns, then "Kernel panic - not syncing"; fresh-clone
	// CI run 14). One vCPU patches and runs its own code.
	VCPUs int
	// MemoryMiB defaults to 1024.
	MemoryMiB int
	// NICs are attached as <interface type='ethernet'>: a tap that libvirt
	// creates and connects to nothing, so the guest reaches no network.
	NICs []NIC
	// ExtraCmdline is appended to "console=ttyS0 root=/dev/vda rw", e.g.
	// "vmpx.poweroff=0" or "vmpx.paths=/etc/foo,/srv".
	ExtraCmdline string
	// DomainType is "qemu" (TCG, default) or "kvm". Use Accel to probe.
	DomainType string
	// URI defaults to DefaultURI.
	URI string
}

// Guest is a prepared (and perhaps running) domain.
type Guest struct {
	// Name is the domain name.
	Name string
	// URI is the libvirt connection.
	URI string
	// Dir holds Overlay and SerialLog.
	Dir string
	// Overlay is the qcow2 root disk backed by the image's base.raw.
	Overlay string
	// SerialLog is the file the guest's serial console is written to.
	SerialLog string
	// Image is the base image.
	Image *Image
	// Options are the effective options (defaults filled in).
	Options Options

	ownDir  bool
	defined bool
}

// Prepare creates the overlay and serial log location for a guest and
// returns it; XML gives the domain definition without any payload CD-ROM.
// Nothing is defined in libvirt yet.
func Prepare(ctx context.Context, img *Image, opts Options) (*Guest, error) {
	if img == nil {
		return nil, errors.New("guest: preparing: nil image")
	}
	if opts.Name == "" {
		var b [5]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("guest: preparing: random name: %w", err)
		}
		opts.Name = NamePrefix + img.Suite + "-" + hex.EncodeToString(b[:])
	}
	if opts.Machine == "" {
		opts.Machine = "pc"
	}
	if opts.Machine != "pc" && opts.Machine != "q35" {
		return nil, fmt.Errorf("guest: preparing %s: machine %q: want pc or q35", opts.Name, opts.Machine)
	}
	if opts.VCPUs <= 0 {
		opts.VCPUs = 1
	}
	if opts.MemoryMiB <= 0 {
		opts.MemoryMiB = 1024
	}
	if opts.DomainType == "" {
		opts.DomainType = "qemu"
	}
	if opts.URI == "" {
		opts.URI = DefaultURI
	}
	for i, n := range opts.NICs {
		if _, err := net.ParseMAC(n.MAC); err != nil {
			return nil, fmt.Errorf("guest: preparing %s: NIC %d: %w", opts.Name, i, err)
		}
		if n.Model == "" {
			opts.NICs[i].Model = "virtio"
		}
	}
	g := &Guest{Name: opts.Name, URI: opts.URI, Image: img, Options: opts}
	if opts.Dir == "" {
		root := "/var/tmp/vmpayload-e2e"
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, fmt.Errorf("guest: preparing %s: %w", opts.Name, err)
		}
		d, err := os.MkdirTemp(root, opts.Name+"-")
		if err != nil {
			return nil, fmt.Errorf("guest: preparing %s: %w", opts.Name, err)
		}
		g.Dir, g.ownDir = d, true
	} else {
		if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("guest: preparing %s: %w", opts.Name, err)
		}
		g.Dir = opts.Dir
	}
	if err := os.Chmod(g.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("guest: preparing %s: %w", opts.Name, err)
	}
	for _, p := range []string{g.Dir, img.Dir} {
		if err := MakeTraversable(p); err != nil {
			return nil, fmt.Errorf("guest: preparing %s: %w", opts.Name, err)
		}
	}
	g.Overlay = filepath.Join(g.Dir, "root.qcow2")
	g.SerialLog = filepath.Join(g.Dir, "serial.log")
	out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2",
		"-b", img.Base, "-F", "raw", g.Overlay).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("guest: preparing %s: qemu-img create overlay: %w: %s", opts.Name, err, strings.TrimSpace(string(out)))
	}
	return g, nil
}

// FixKVMDevice gives /dev/kvm the owner and mode udev would (root:kvm
// 0660) when it is root-only, as on machines without udev. libvirt 9.0
// otherwise finds KVM "enabled when probing but not available now" for the
// libvirt-qemu user, throws its capabilities cache away on every lookup and
// re-probes qemu, making each define or start take a minute. It returns
// whether it changed anything.
func FixKVMDevice() (bool, error) {
	st, err := os.Stat("/dev/kvm")
	if err != nil {
		return false, nil
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || st.Mode().Perm()&0o060 == 0o060 && sys.Gid != 0 {
		return false, nil
	}
	out, err := exec.Command("getent", "group", "kvm").Output()
	if err != nil {
		return false, fmt.Errorf("fixing /dev/kvm: no kvm group: %w", err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), ":")
	if len(f) < 3 {
		return false, fmt.Errorf("fixing /dev/kvm: bad group entry %q", out)
	}
	var gid int
	if _, err := fmt.Sscan(f[2], &gid); err != nil {
		return false, fmt.Errorf("fixing /dev/kvm: kvm gid %q: %w", f[2], err)
	}
	if err := os.Chown("/dev/kvm", 0, gid); err != nil {
		return false, fmt.Errorf("fixing /dev/kvm: %w", err)
	}
	if err := os.Chmod("/dev/kvm", 0o660); err != nil {
		return false, fmt.Errorf("fixing /dev/kvm: %w", err)
	}
	slog.Info("set /dev/kvm to root:kvm 0660 (no udev on this machine)")
	return true, nil
}

// MakeTraversable adds o+x to every directory from dir up to / that lacks
// it, so libvirt-qemu (uid 64055) can reach files below dir.
func MakeTraversable(dir string) error {
	p, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("making %s traversable: %w", dir, err)
	}
	for {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("making %s traversable: %w", dir, err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(p, st.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid)|0o001); err != nil {
				return fmt.Errorf("making %s traversable: %w", dir, err)
			}
		}
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		p = parent
	}
}

type domainXML struct {
	XMLName xml.Name `xml:"domain"`
	Type    string   `xml:"type,attr"`
	Name    string   `xml:"name"`
	Memory  struct {
		Unit  string `xml:"unit,attr"`
		Value int    `xml:",chardata"`
	} `xml:"memory"`
	VCPU int `xml:"vcpu"`
	OS   struct {
		Type struct {
			Arch    string `xml:"arch,attr"`
			Machine string `xml:"machine,attr"`
			Value   string `xml:",chardata"`
		} `xml:"type"`
		Kernel  string `xml:"kernel"`
		Initrd  string `xml:"initrd"`
		Cmdline string `xml:"cmdline"`
	} `xml:"os"`
	Features struct {
		ACPI struct{} `xml:"acpi"`
		APIC struct{} `xml:"apic"`
	} `xml:"features"`
	Clock struct {
		Offset string `xml:"offset,attr"`
	} `xml:"clock"`
	OnPoweroff string     `xml:"on_poweroff"`
	OnReboot   string     `xml:"on_reboot"`
	OnCrash    string     `xml:"on_crash"`
	Devices    devicesXML `xml:"devices"`
}

type controllerXML struct {
	Type  string `xml:"type,attr"`
	Model string `xml:"model,attr,omitempty"`
	Index string `xml:"index,attr,omitempty"`
}

type interfaceXML struct {
	Type string `xml:"type,attr"`
	MAC  struct {
		Address string `xml:"address,attr"`
	} `xml:"mac"`
	Model struct {
		Type string `xml:"type,attr"`
	} `xml:"model"`
}

type devicesXML struct {
	Disks       []diskXML       `xml:"disk"`
	Controllers []controllerXML `xml:"controller"`
	Interfaces  []interfaceXML  `xml:"interface"`
	Serial      struct {
		Type   string `xml:"type,attr"`
		Source struct {
			Path string `xml:"path,attr"`
		} `xml:"source"`
		Target struct {
			Port int `xml:"port,attr"`
		} `xml:"target"`
	} `xml:"serial"`
	RNG struct {
		Model   string `xml:"model,attr"`
		Backend struct {
			Model string `xml:"model,attr"`
			Value string `xml:",chardata"`
		} `xml:"backend"`
	} `xml:"rng"`
	Memballoon struct {
		Model string `xml:"model,attr"`
	} `xml:"memballoon"`
}

type diskXML struct {
	XMLName xml.Name `xml:"disk"`
	Type    string   `xml:"type,attr"`
	Device  string   `xml:"device,attr"`
	Driver  struct {
		Name string `xml:"name,attr"`
		Type string `xml:"type,attr"`
	} `xml:"driver"`
	Source struct {
		File string `xml:"file,attr"`
	} `xml:"source"`
	Target struct {
		Dev string `xml:"dev,attr"`
		Bus string `xml:"bus,attr"`
	} `xml:"target"`
	ReadOnly *struct{} `xml:"readonly"`
}

// Cmdline returns the kernel command line the guest boots with.
func (g *Guest) Cmdline() string {
	c := "console=ttyS0 root=/dev/vda rw"
	if g.Options.ExtraCmdline != "" {
		c += " " + g.Options.ExtraCmdline
	}
	return c
}

func (g *Guest) domain() domainXML {
	var d domainXML
	d.Type = g.Options.DomainType
	d.Name = g.Name
	d.Memory.Unit, d.Memory.Value = "MiB", g.Options.MemoryMiB
	d.VCPU = g.Options.VCPUs
	d.OS.Type.Arch, d.OS.Type.Machine, d.OS.Type.Value = "x86_64", g.Options.Machine, "hvm"
	d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline = g.Image.Kernel, g.Image.Initrd, g.Cmdline()
	d.Clock.Offset = "utc"
	d.OnPoweroff, d.OnReboot, d.OnCrash = "destroy", "restart", "destroy"
	var root diskXML
	root.Type, root.Device = "file", "disk"
	root.Driver.Name, root.Driver.Type = "qemu", "qcow2"
	root.Source.File = g.Overlay
	root.Target.Dev, root.Target.Bus = "vda", "virtio"
	d.Devices.Disks = []diskXML{root}
	d.Devices.Controllers = append(d.Devices.Controllers, controllerXML{Type: "scsi", Model: "virtio-scsi", Index: "0"})
	for _, n := range g.Options.NICs {
		ifx := interfaceXML{Type: "ethernet"}
		ifx.MAC.Address, ifx.Model.Type = n.MAC, n.Model
		d.Devices.Interfaces = append(d.Devices.Interfaces, ifx)
	}
	d.Devices.Serial.Type = "file"
	d.Devices.Serial.Source.Path = g.SerialLog
	d.Devices.RNG.Model = "virtio"
	d.Devices.RNG.Backend.Model, d.Devices.RNG.Backend.Value = "random", "/dev/urandom"
	d.Devices.Memballoon.Model = "none"
	return d
}

// XML returns the domain definition without a payload CD-ROM.
func (g *Guest) XML() (string, error) {
	return marshal(g.domain())
}

func marshal(d domainXML) (string, error) {
	b, err := xml.MarshalIndent(d, "", "  ")
	if err != nil {
		return "", fmt.Errorf("guest: rendering domain XML of %s: %w", d.Name, err)
	}
	return string(b), nil
}

// CDROMXML returns a <disk device='cdrom'> element for iso on bus (BusIDE,
// BusSATA or BusSCSI), suitable for the domain XML or attach-device.
func CDROMXML(iso, bus string) (string, error) {
	d, err := cdrom(iso, bus)
	if err != nil {
		return "", err
	}
	b, err := xml.MarshalIndent(d, "", "  ")
	if err != nil {
		return "", fmt.Errorf("guest: rendering CD-ROM XML: %w", err)
	}
	return string(b), nil
}

func cdrom(iso, bus string) (diskXML, error) {
	var d diskXML
	d.Type, d.Device = "file", "cdrom"
	d.Driver.Name, d.Driver.Type = "qemu", "raw"
	d.Source.File = iso
	d.ReadOnly = &struct{}{}
	switch bus {
	case BusIDE:
		d.Target.Dev = "hdc"
	case BusSATA, BusSCSI:
		d.Target.Dev = "sda"
	default:
		return d, fmt.Errorf("guest: CD-ROM bus %q: want ide, sata or scsi", bus)
	}
	d.Target.Bus = bus
	return d, nil
}

// XMLWithCDROM returns the domain definition with iso attached as a CD-ROM
// on bus. IDE needs machine pc.
func (g *Guest) XMLWithCDROM(iso, bus string) (string, error) {
	if bus == BusIDE && g.Options.Machine == "q35" {
		return "", fmt.Errorf("guest: %s: q35 has no IDE bus", g.Name)
	}
	cd, err := cdrom(iso, bus)
	if err != nil {
		return "", err
	}
	d := g.domain()
	d.Devices.Disks = append(d.Devices.Disks, cd)
	return marshal(d)
}

// Define defines domainXML in libvirt (it should be this guest's XML, e.g.
// from XML or XMLWithCDROM, maybe edited).
func (g *Guest) Define(ctx context.Context, domainXML string) error {
	f := filepath.Join(g.Dir, "domain.xml")
	if err := os.WriteFile(f, []byte(domainXML), 0o644); err != nil {
		return fmt.Errorf("guest: defining %s: %w", g.Name, err)
	}
	if _, err := Virsh(ctx, g.URI, "define", f); err != nil {
		return fmt.Errorf("guest: defining %s: %w", g.Name, err)
	}
	g.defined = true
	return nil
}

// Start starts the defined domain.
func (g *Guest) Start(ctx context.Context) error {
	if _, err := Virsh(ctx, g.URI, "start", g.Name); err != nil {
		return fmt.Errorf("guest: starting %s: %w", g.Name, err)
	}
	return nil
}

// Boot prepares a guest with iso as its CD-ROM on bus, defines and starts
// it. Call Cleanup when done, also after an error if the guest is non-nil.
func Boot(ctx context.Context, img *Image, opts Options, iso, bus string) (*Guest, error) {
	g, err := Prepare(ctx, img, opts)
	if err != nil {
		return nil, err
	}
	if err := MakeTraversable(filepath.Dir(iso)); err != nil {
		return g, fmt.Errorf("guest: booting %s: %w", g.Name, err)
	}
	x, err := g.XMLWithCDROM(iso, bus)
	if err != nil {
		return g, err
	}
	if err := g.Define(ctx, x); err != nil {
		return g, err
	}
	if err := g.Start(ctx); err != nil {
		return g, err
	}
	slog.Info("guest started", "domain", g.Name, "suite", img.Suite, "machine", g.Options.Machine, "cdrom_bus", bus, "serial", g.SerialLog)
	return g, nil
}

// State returns the domain state as virsh domstate prints it ("running",
// "shut off", ...).
func (g *Guest) State(ctx context.Context) (string, error) {
	out, err := Virsh(ctx, g.URI, "domstate", g.Name)
	if err != nil {
		return "", fmt.Errorf("guest: state of %s: %w", g.Name, err)
	}
	return strings.TrimSpace(out), nil
}

func (g *Guest) stopped(ctx context.Context) (bool, error) {
	s, err := g.State(ctx)
	if err != nil {
		return false, err
	}
	return s == "shut off" || s == "crashed", nil
}

// WaitReport waits for the guest's report like the package-level
// WaitReport, but fails early when the domain stops without one.
func (g *Guest) WaitReport(ctx context.Context) (*Report, error) {
	reps, err := waitReports(ctx, g.SerialLog, 1, g.stopped)
	if err != nil {
		return nil, fmt.Errorf("guest %s: %w", g.Name, err)
	}
	return reps[0], nil
}

// WaitShutdown waits until the domain is shut off (bounded by ctx, or
// DefaultWait without a deadline).
func (g *Guest) WaitShutdown(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWait)
		defer cancel()
	}
	for {
		down, err := g.stopped(ctx)
		if err == nil && down {
			return nil
		}
		select {
		case <-ctx.Done():
			log, _ := os.ReadFile(g.SerialLog)
			return fmt.Errorf("guest %s: waiting for shutdown: %w (last state error: %v)\n--- serial log tail ---\n%s", g.Name, ctx.Err(), err, tail(string(log), 80))
		case <-time.After(time.Second):
		}
	}
}

// ReadFile reads path from the guest's root filesystem offline (the guest
// must be shut off): the overlay is flattened with qemu-img convert and the
// file read with debugfs.
func (g *Guest) ReadFile(ctx context.Context, path string) ([]byte, error) {
	raw := filepath.Join(g.Dir, "flat.raw")
	defer os.Remove(raw)
	if out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-O", "raw", g.Overlay, raw).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("guest %s: reading %s: qemu-img convert: %w: %s", g.Name, path, err, strings.TrimSpace(string(out)))
	}
	cmd := exec.CommandContext(ctx, "debugfs", "-R", "cat "+path, raw)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("guest %s: reading %s: debugfs: %w: %s", g.Name, path, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "File not found") {
		return nil, fmt.Errorf("guest %s: reading %s: %w", g.Name, path, fs.ErrNotExist)
	}
	return out, nil
}

// Cleanup destroys and undefines the domain (only this guest's) and removes
// the overlay, and the directory if Prepare created it. It keeps going after
// errors and returns them joined.
func (g *Guest) Cleanup(ctx context.Context) error {
	var errs []error
	if s, err := g.State(ctx); err == nil && s != "shut off" {
		if _, err := Virsh(ctx, g.URI, "destroy", g.Name); err != nil {
			errs = append(errs, err)
		}
	}
	// Undefine even when Define reported failure: a define cut short by a
	// libvirtd restart may still have taken effect. The name is this guest's.
	if _, err := Virsh(ctx, g.URI, "undefine", g.Name); err != nil && g.defined && !strings.Contains(err.Error(), "failed to get domain") {
		errs = append(errs, err)
	}
	if g.ownDir {
		errs = append(errs, os.RemoveAll(g.Dir))
	} else {
		errs = append(errs, ignoreNotExist(os.Remove(g.Overlay)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("guest: cleaning up %s: %w", g.Name, err)
	}
	return nil
}

func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Virsh runs `virsh -c uri args...` and returns stdout (testenv.Virsh:
// failures that look like a briefly absent libvirtd are retried for up to
// 60 s).
func Virsh(ctx context.Context, uri string, args ...string) (string, error) {
	return testenv.Virsh(ctx, uri, args...)
}
