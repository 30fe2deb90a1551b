// Package libvirtxtest provides Fake, an in-memory libvirtx.Host whose
// calls can be scripted to fail, for fast table tests of code that drives
// libvirt. It models what such code reads back (domains with their
// persistent and live XML, the active state) and records every call; it
// does not model libvirt's device semantics: device calls change nothing
// unless a test's OnCall hook does. The real daemon stays the judge: tests
// against libvirtd (VMPAYLOAD_LIBVIRTD=1) cover what the fake cannot.
package libvirtxtest

import (
	"context"
	"encoding/xml"
	"fmt"
	"strings"
	"sync"

	"libvirt.org/go/libvirt"

	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// Call is one recorded Host call.
type Call struct {
	Method string // "Domain", "DefineXML", "Start", "LiveXML", "SavedXML", "Reset", "UpdateDevice", "AttachDevice", "DetachDevice", "ListDomains"
	Arg    string // the name or UUID looked up, the UUID acted on, or the defined name
	XML    string // the domain or device XML given
	Flags  libvirtx.DomainDeviceModifyFlags
}

type domain struct {
	name, uuid string
	active     bool
	xml, live  string
	saved      string // the managed save image's XML ("" for none)
}

// Fake is an in-memory libvirtx.Host. The zero value is not ready: use New.
// All methods are safe for concurrent use.
type Fake struct {
	// OnCall, when set, is consulted before each call is carried out
	// (after it is recorded); an error it returns is the call's result
	// and the call changes nothing.
	OnCall func(c Call) error

	mu     sync.Mutex
	doms   []*domain
	calls  []Call
	fail   map[string][]error
	nextID int
	events chan libvirtx.Event
	closed bool
	caps   map[string]string // machine ("" for any) -> domain capabilities
}

var _ libvirtx.DomainCapabilitiesReader = (*Fake)(nil)

// SetDomainCapabilities makes DomainCapabilities return xml (a
// <domainCapabilities> document, e.g. one virsh domcapabilities printed)
// for machine, or for every machine when machine is "". Without one it
// fails as a driver without the call does (IsUnsupported).
func (f *Fake) SetDomainCapabilities(machine, xml string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.caps == nil {
		f.caps = map[string]string{}
	}
	f.caps[machine] = xml
}

// DomainCapabilities implements libvirtx.DomainCapabilitiesReader with
// the documents SetDomainCapabilities gave.
func (f *Fake) DomainCapabilities(_ context.Context, emulator, arch, machine, virtType string) (string, error) {
	if err := f.begin(Call{Method: "DomainCapabilities", Arg: machine}); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if x, ok := f.caps[machine]; ok {
		return x, nil
	}
	if x, ok := f.caps[""]; ok {
		return x, nil
	}
	return "", libvirt.Error{Code: libvirt.ERR_NO_SUPPORT, Domain: libvirt.FROM_DOMAIN, Message: "this function is not supported by the connection driver: virConnectGetDomainCapabilities"}
}

var _ libvirtx.Host = (*Fake)(nil)

// New returns an empty Fake.
func New() *Fake {
	return &Fake{fail: map[string][]error{}, events: make(chan libvirtx.Event, 64)}
}

// FailNext scripts the next len(errs) calls of method: the i-th returns
// errs[i] (nil: the call is carried out).
func (f *Fake) FailNext(method string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = append(f.fail[method], errs...)
}

// Calls returns the calls made so far.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Methods returns the method names of the calls made so far, leaving out
// the read-only lookups (Domain, LiveXML, SavedXML, ListDomains,
// DomainCapabilities).
func (f *Fake) Methods() []string {
	var m []string
	for _, c := range f.Calls() {
		switch c.Method {
		case "Domain", "LiveXML", "SavedXML", "ListDomains", "DomainCapabilities":
			continue
		}
		m = append(m, c.Method)
	}
	return m
}

// ResetCalls forgets the recorded calls.
func (f *Fake) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// SetActive marks domain uuid running (its live XML becomes a copy of the
// persistent one) or shut off.
func (f *Fake) SetActive(uuid string, active bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.find(uuid); d != nil {
		d.active = active
		d.live = ""
		if active {
			d.live = d.xml
		}
	}
}

// SetLiveXML replaces the live XML of domain uuid (e.g. to show a drive's
// tray open).
func (f *Fake) SetLiveXML(uuid, xml string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.find(uuid); d != nil {
		d.live = xml
	}
}

// Remove drops domain uuid without an event, as libvirt does when it
// migrates a domain away with --undefinesource.
func (f *Fake) Remove(uuid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, d := range f.doms {
		if d == f.find(uuid) {
			f.doms = append(f.doms[:i], f.doms[i+1:]...)
			return
		}
	}
}

// Emit queues ev on Events, as libvirt's lifecycle callback would. It
// reports false, queueing nothing, after Close or while 64 events are
// undelivered.
func (f *Fake) Emit(ev libvirtx.Event) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	select {
	case f.events <- ev:
		return true
	default:
		return false
	}
}

// XML returns the persistent XML of domain uuid ("" if there is none).
func (f *Fake) XML(uuid string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.find(uuid); d != nil {
		return d.xml
	}
	return ""
}

// NoDomain is the error libvirt gives for a domain that does not exist.
func NoDomain(nameOrUUID string) error {
	return libvirt.Error{Code: libvirt.ERR_NO_DOMAIN, Domain: libvirt.FROM_DOMAIN, Message: fmt.Sprintf("Domain not found: no domain with matching name or uuid '%s'", nameOrUUID)}
}

// TrayBusy is the error QEMU gives (through libvirt) for a media change
// while the tray is held shut.
func TrayBusy() error {
	return libvirt.Error{Code: libvirt.ERR_INTERNAL_ERROR, Domain: libvirt.FROM_QEMU,
		Message: "internal error: unable to execute QEMU command 'blockdev-remove-medium': Tray of device 'ua-vmpayload' is not open"}
}

// Failed is a generic libvirt error with message msg.
func Failed(msg string) error {
	return libvirt.Error{Code: libvirt.ERR_INTERNAL_ERROR, Domain: libvirt.FROM_QEMU, Message: msg}
}

// find returns the domain with this UUID or name; f.mu is held.
func (f *Fake) find(nameOrUUID string) *domain {
	if domxml.IsUUID(nameOrUUID) {
		u := domxml.CanonicalUUID(nameOrUUID)
		for _, d := range f.doms {
			if d.uuid == u {
				return d
			}
		}
	}
	for _, d := range f.doms {
		if d.name == nameOrUUID {
			return d
		}
	}
	return nil
}

// begin records c and returns the scripted error for it, if any.
func (f *Fake) begin(c Call) error {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	var err error
	if q := f.fail[c.Method]; len(q) > 0 {
		err, f.fail[c.Method] = q[0], q[1:]
	}
	hook := f.OnCall
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if hook != nil {
		return hook(c)
	}
	return nil
}

func (d *domain) info() libvirtx.DomainInfo {
	return libvirtx.DomainInfo{Name: d.name, UUID: d.uuid, Active: d.active, InactiveXML: d.xml}
}

// Domain looks a domain up by UUID, then by name.
func (f *Fake) Domain(_ context.Context, nameOrUUID string) (libvirtx.DomainInfo, error) {
	if err := f.begin(Call{Method: "Domain", Arg: nameOrUUID}); err != nil {
		return libvirtx.DomainInfo{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.find(nameOrUUID); d != nil {
		return d.info(), nil
	}
	return libvirtx.DomainInfo{}, NoDomain(nameOrUUID)
}

// DefineXML defines a domain, or redefines the one of the same name or
// UUID. A new domain without <uuid> gets one.
func (f *Fake) DefineXML(_ context.Context, xml string) (libvirtx.DomainInfo, error) {
	name, err := domainName(xml)
	if err != nil {
		return libvirtx.DomainInfo{}, libvirt.Error{Code: libvirt.ERR_XML_ERROR, Domain: libvirt.FROM_DOMAIN, Message: err.Error()}
	}
	if err := f.begin(Call{Method: "DefineXML", Arg: name, XML: xml}); err != nil {
		return libvirtx.DomainInfo{}, err
	}
	var uuid string
	if d, err := domxml.Read(xml); err == nil {
		uuid = d.UUID()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.find(name)
	if d == nil && uuid != "" {
		d = f.find(uuid)
	}
	if d == nil {
		if !domxml.IsUUID(uuid) {
			f.nextID++
			uuid = fmt.Sprintf("00000000-0000-4000-8000-%012d", f.nextID)
			xml = strings.Replace(xml, "<name>"+name+"</name>", "<name>"+name+"</name><uuid>"+uuid+"</uuid>", 1)
		}
		d = &domain{name: name, uuid: domxml.CanonicalUUID(uuid)}
		f.doms = append(f.doms, d)
	}
	d.name, d.xml = name, xml
	return d.info(), nil
}

func (f *Fake) act(method, uuid, xml string, flags libvirtx.DomainDeviceModifyFlags, do func(d *domain) error) error {
	if err := f.begin(Call{Method: method, Arg: uuid, XML: xml, Flags: flags}); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.find(uuid)
	if d == nil {
		return NoDomain(uuid)
	}
	if do != nil {
		return do(d)
	}
	return nil
}

func notRunning(d *domain) error {
	return libvirt.Error{Code: libvirt.ERR_OPERATION_INVALID, Domain: libvirt.FROM_DOMAIN, Message: "Requested operation is not valid: domain is not running"}
}

// Start starts a shut-off domain.
func (f *Fake) Start(_ context.Context, uuid string) error {
	return f.act("Start", uuid, "", 0, func(d *domain) error {
		if d.active {
			return libvirt.Error{Code: libvirt.ERR_OPERATION_INVALID, Domain: libvirt.FROM_DOMAIN, Message: "Requested operation is not valid: domain is already running"}
		}
		d.active, d.live = true, d.xml
		if d.saved != "" { // a start resumes the managed save
			d.live, d.saved = d.saved, ""
		}
		return nil
	})
}

// LiveXML returns the live XML of a running domain.
func (f *Fake) LiveXML(_ context.Context, uuid string) (string, error) {
	var x string
	err := f.act("LiveXML", uuid, "", 0, func(d *domain) error {
		if !d.active {
			return notRunning(d)
		}
		x = d.live
		return nil
	})
	return x, err
}

// SetSavedXML gives the shut-off domain uuid a managed save image holding
// xml ("" removes it), as virsh managedsave leaves one.
func (f *Fake) SetSavedXML(uuid, xml string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.find(uuid); d != nil {
		d.saved = xml
	}
}

// SavedXML returns the XML of the domain's managed save image ("" for
// none).
func (f *Fake) SavedXML(_ context.Context, uuid string) (string, error) {
	var x string
	err := f.act("SavedXML", uuid, "", 0, func(d *domain) error {
		x = d.saved
		return nil
	})
	return x, err
}

// Reset resets a running domain: its live XML is read again from the
// persistent one, as libvirt re-reads the drives' state.
func (f *Fake) Reset(_ context.Context, uuid string) error {
	return f.act("Reset", uuid, "", 0, func(d *domain) error {
		if !d.active {
			return notRunning(d)
		}
		d.live = d.xml
		return nil
	})
}

// UpdateDevice records the change; it changes nothing.
func (f *Fake) UpdateDevice(_ context.Context, uuid, deviceXML string, flags libvirtx.DomainDeviceModifyFlags) error {
	return f.act("UpdateDevice", uuid, deviceXML, flags, nil)
}

// AttachDevice records the change; it changes nothing.
func (f *Fake) AttachDevice(_ context.Context, uuid, deviceXML string, flags libvirtx.DomainDeviceModifyFlags) error {
	return f.act("AttachDevice", uuid, deviceXML, flags, nil)
}

// DetachDevice records the change; it changes nothing.
func (f *Fake) DetachDevice(_ context.Context, uuid, deviceXML string, flags libvirtx.DomainDeviceModifyFlags) error {
	return f.act("DetachDevice", uuid, deviceXML, flags, nil)
}

// ListDomains lists every domain.
func (f *Fake) ListDomains(context.Context) ([]libvirtx.DomainInfo, error) {
	if err := f.begin(Call{Method: "ListDomains"}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []libvirtx.DomainInfo
	for _, d := range f.doms {
		out = append(out, d.info())
	}
	return out, nil
}

// Events returns the channel Emit sends on; Close closes it.
func (f *Fake) Events() <-chan libvirtx.Event { return f.events }

// Reconnects is always 0.
func (f *Fake) Reconnects() uint64 { return 0 }

// Close closes the Events channel.
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.events)
	}
	return nil
}

// domainName returns the <name> of a domain definition.
func domainName(def string) (string, error) {
	var d struct {
		Name string `xml:"name"`
	}
	if err := xml.Unmarshal([]byte(def), &d); err != nil {
		return "", fmt.Errorf("reading domain name: %w", err)
	}
	if name := strings.TrimSpace(d.Name); name != "" {
		return name, nil
	}
	return "", fmt.Errorf("reading domain name: no <name>")
}
