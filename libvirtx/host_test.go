package libvirtx

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"libvirt.org/go/libvirt"
)

// eventBound bounds every wait for an event; it is a safety net against a
// hung test, not a timing assertion.
const eventBound = 2 * time.Minute

func openTestHost(t *testing.T, uri string) *LibvirtHost {
	t.Helper()
	h, err := OpenHost(uri, HostOptions{})
	if err != nil {
		t.Fatalf("OpenHost(%q): %v", uri, err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// waitEvent reads events until one matches, failing on channel close or
// after eventBound.
func waitEvent(t *testing.T, h Host, match func(Event) bool, what string) Event {
	t.Helper()
	timeout := time.After(eventBound)
	for {
		select {
		case ev, ok := <-h.Events():
			if !ok {
				t.Fatalf("events closed while waiting for %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event within %v", what, eventBound)
		}
	}
}

// define defines the small test domain name on h and returns it; it fails t
// on an error.
func define(t *testing.T, h *LibvirtHost, name string) DomainInfo {
	t.Helper()
	di, err := h.DefineXML(context.Background(), testDomainXML(name, ""))
	if err != nil {
		t.Fatalf("DefineXML %s: %v", name, err)
	}
	return di
}

func isEvent(typ EventType, uuid string) func(Event) bool {
	return func(ev Event) bool { return ev.Type == typ && (uuid == "" || ev.UUID == uuid) }
}

func TestHostDomainLifecycle(t *testing.T) {
	h := openTestHost(t, "test:///default")
	ctx := context.Background()
	di := define(t, h, "vmpx-host")
	if di.Name != "vmpx-host" || di.Active || !domxml.IsUUID(di.UUID) || !strings.Contains(di.InactiveXML, "<name>vmpx-host</name>") {
		t.Fatalf("DefineXML info = %+v", di)
	}
	ev := waitEvent(t, h, isEvent(EventDefined, di.UUID), "defined")
	if ev.Name != "vmpx-host" {
		t.Errorf("defined event name %q", ev.Name)
	}

	for _, ref := range []string{di.Name, di.UUID, strings.ReplaceAll(di.UUID, "-", ""), strings.ToUpper(di.UUID)} {
		got, err := h.Domain(ctx, ref)
		if err != nil || got.UUID != di.UUID {
			t.Errorf("Domain(%q) = %+v, %v", ref, got, err)
		}
	}

	if err := h.Start(ctx, di.UUID); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitEvent(t, h, isEvent(EventStarted, di.UUID), "started")
	if got, err := h.Domain(ctx, di.UUID); err != nil || !got.Active {
		t.Errorf("after start: %+v, %v", got, err)
	}

	// Redefining with the payload drive keeps the UUID and fires "defined".
	ed, err := domxml.NewEdit(di.InactiveXML)
	if err == nil {
		_, _, err = ed.SetPayloadDrive("/var/lib/vmpayload/p.iso", domxml.BusAuto)
	}
	x := ""
	if err == nil {
		x, err = ed.XML()
	}
	if err != nil {
		t.Fatal(err)
	}
	re, err := h.DefineXML(ctx, x)
	if err != nil || re.UUID != di.UUID {
		t.Fatalf("redefine: %+v, %v", re, err)
	}
	waitEvent(t, h, isEvent(EventDefined, di.UUID), "defined (update)")
	if p, found, err := domxml.FindPayload(re.InactiveXML); err != nil || !found || p.Path != "/var/lib/vmpayload/p.iso" {
		t.Errorf("payload after redefine: %+v %v %v", p, found, err)
	}

	if err := h.Destroy(ctx, di.UUID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	waitEvent(t, h, isEvent(EventStopped, di.UUID), "stopped")
	if err := h.Undefine(ctx, di.UUID); err != nil {
		t.Fatalf("Undefine: %v", err)
	}
	waitEvent(t, h, isEvent(EventUndefined, di.UUID), "undefined")
	if _, err := h.Domain(ctx, di.UUID); !IsNotFound(err) || IsDisconnected(err) {
		t.Errorf("Domain after undefine: err = %v, want not found", err)
	}
}

// A rename is an undefine of the old name and a define of the new one with
// the same UUID; both events say Renamed (the agent must not take the
// first for an undefine and delete the domain's payload).
func TestHostRenameEvents(t *testing.T) {
	h := openTestHost(t, "test:///default")
	ctx := context.Background()
	di := define(t, h, "vmpx-ren-old")
	if ev := waitEvent(t, h, isEvent(EventDefined, di.UUID), "defined"); ev.Renamed {
		t.Errorf("a plain define says Renamed: %+v", ev)
	}
	err := h.withConn(ctx, "renaming", func(c *libvirt.Connect) error {
		d, err := c.LookupDomainByUUIDString(di.UUID)
		if err != nil {
			return err
		}
		defer d.Free()
		return d.Rename("vmpx-ren-new", 0)
	})
	if err != nil {
		t.Fatalf("rename: %v", err)
	}
	if ev := waitEvent(t, h, isEvent(EventUndefined, di.UUID), "undefined (rename)"); !ev.Renamed || ev.Name != "vmpx-ren-old" {
		t.Errorf("undefine half of the rename: %+v, want Renamed with the old name", ev)
	}
	if ev := waitEvent(t, h, isEvent(EventDefined, di.UUID), "defined (rename)"); !ev.Renamed || ev.Name != "vmpx-ren-new" {
		t.Errorf("define half of the rename: %+v, want Renamed with the new name", ev)
	}
	if err := h.Undefine(ctx, di.UUID); err != nil {
		t.Fatalf("Undefine: %v", err)
	}
	if ev := waitEvent(t, h, isEvent(EventUndefined, di.UUID), "undefined"); ev.Renamed {
		t.Errorf("a plain undefine says Renamed: %+v", ev)
	}
}

func TestHostErrors(t *testing.T) {
	h := openTestHost(t, nodeURI(t))
	ctx := context.Background()
	const running = "6695eb01-f6a4-8304-79aa-97f2502e193f"
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name                   string
		call                   func() error
		notFound, unsupp, disc bool
		is                     error
	}{
		{name: "missing name", call: func() error { _, err := h.Domain(ctx, "vmpx-none"); return err }, notFound: true},
		{name: "missing uuid", call: func() error { _, err := h.Domain(ctx, "00000000-0000-0000-0000-000000000000"); return err }, notFound: true},
		{name: "start missing", call: func() error { return h.Start(ctx, "vmpx-none") }, notFound: true},
		{name: "update unsupported", call: func() error {
			return h.UpdateDevice(ctx, running, "<disk/>", DOMAIN_DEVICE_MODIFY_LIVE|DOMAIN_DEVICE_MODIFY_CONFIG)
		}, unsupp: true},
		{name: "attach unsupported", call: func() error { return h.AttachDevice(ctx, running, "<disk/>", DOMAIN_DEVICE_MODIFY_CONFIG) }, unsupp: true},
		{name: "detach unsupported", call: func() error { return h.DetachDevice(ctx, running, "<disk/>", DOMAIN_DEVICE_MODIFY_CONFIG) }, unsupp: true},
		{name: "canceled", call: func() error { _, err := h.ListDomains(canceled); return err }, is: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil {
				t.Fatal("want error")
			}
			if IsNotFound(err) != tt.notFound || IsUnsupported(err) != tt.unsupp || IsDisconnected(err) != tt.disc {
				t.Errorf("%v: notFound=%v unsupported=%v disconnected=%v", err, IsNotFound(err), IsUnsupported(err), IsDisconnected(err))
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("%v is not %v", err, tt.is)
			}
		})
	}
}

func TestHostListDomainsNodeFile(t *testing.T) {
	h := openTestHost(t, nodeURI(t))
	doms, err := h.ListDomains(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(doms) != 2 {
		t.Fatalf("ListDomains = %d domains, want 2", len(doms))
	}
	byName := map[string]DomainInfo{}
	for _, d := range doms {
		byName[d.Name] = d
	}
	run, ok := byName["vmpx-node-running"]
	if !ok || !run.Active || run.UUID != "6695eb01-f6a4-8304-79aa-97f2502e193f" {
		t.Fatalf("vmpx-node-running = %+v", run)
	}
	// The user alias survives in the inactive XML: the agent finds its drive.
	p, found, err := domxml.FindPayload(run.InactiveXML)
	if err != nil || !found || p.Path != "/var/lib/vmpayload/payload/old.iso" || p.Target != "hdc" {
		t.Errorf("FindPayload = %+v, %v, %v", p, found, err)
	}
	if d, err := domxml.Read(run.InactiveXML); err != nil || len(d.ReferencedFiles()) != 1 {
		t.Errorf("ReferencedFiles of %s: %v", run.InactiveXML, err)
	}
}

// TestHostKeepsOneConnection checks that state created through the host is
// still there on later calls. The test driver's state lives only while a
// connection to it is open (the second half proves that premise here), so
// this fails if the host reopened its connection per call.
func TestHostKeepsOneConnection(t *testing.T) {
	h, err := OpenHost("test:///default", HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	di := define(t, h, "vmpx-keep")
	for i := 0; i < 3; i++ {
		if _, err := h.Domain(ctx, di.UUID); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	h.Close()
	// libvirt drops the connection's last reference (and with it the test
	// driver's state) only once its event loop has flushed the deregistered
	// lifecycle callback, which can be a moment after Close returns. A host
	// that kept reopening connections would leave the state in place for good.
	deadline := time.Now().Add(5 * time.Second)
	for {
		other, err := OpenHost("test:///default", HostOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = other.Domain(ctx, di.UUID)
		other.Close()
		if IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("test driver state outlived its connection: err = %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHostClose(t *testing.T) {
	h, err := OpenHost("test:///default", HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := <-h.Events(); ok {
		t.Error("Events not closed")
	}
	if _, err := h.ListDomains(context.Background()); !errors.Is(err, ErrClosed) || IsDisconnected(err) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
}

// TestHostReconnectMachinery drives the reconnection path without a daemon:
// the connection is reported lost (as the close callback does) and the
// first two redials fail. libvirtd restarts are covered by
// TestLibvirtdReconnect.
func TestHostReconnectMachinery(t *testing.T) {
	var dials, failUntil atomic.Int32
	dial := func(uri string) (*libvirt.Connect, error) {
		n := dials.Add(1)
		if n > 1 && n <= failUntil.Load() {
			return nil, libvirt.Error{Code: libvirt.ERR_SYSTEM_ERROR, Domain: libvirt.FROM_RPC, Message: "injected dial failure", Level: libvirt.ERR_ERROR}
		}
		return libvirt.NewConnect(uri)
	}
	h, err := openHost("test:///default", HostOptions{MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	for round := 1; round <= 2; round++ {
		failUntil.Store(dials.Load() + 2) // the next two dials fail
		h.mu.RLock()
		gen := h.gen
		h.mu.RUnlock()
		h.reportLost(gen + 100) // a stale generation is ignored
		h.reportLost(gen)
		waitEvent(t, h, isEvent(EventDisconnected, ""), "disconnected")
		waitEvent(t, h, isEvent(EventReconnected, ""), "reconnected")
		if got := h.Reconnects(); got != uint64(round) {
			t.Fatalf("Reconnects = %d, want %d", got, round)
		}
		// The new connection works and delivers events.
		di := define(t, h, "vmpx-reconn")
		waitEvent(t, h, isEvent(EventDefined, di.UUID), "defined after reconnect")
	}
	if d := dials.Load(); d != 1+2*3 {
		t.Errorf("dials = %d, want 7 (1 + 2 rounds of 2 failures and 1 success)", d)
	}
}

func TestHostCallsWhileDisconnected(t *testing.T) {
	block := make(chan struct{})
	var dials atomic.Int32
	dial := func(uri string) (*libvirt.Connect, error) {
		if dials.Add(1) > 1 {
			<-block
		}
		return libvirt.NewConnect(uri)
	}
	h, err := openHost("test:///default", HostOptions{}, dial)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.reportLost(h.gen)
	waitEvent(t, h, isEvent(EventDisconnected, ""), "disconnected")
	ctx := context.Background()
	calls := []struct {
		name string
		call func() error
	}{
		{"Domain", func() error { _, err := h.Domain(ctx, "x"); return err }},
		{"DefineXML", func() error { _, err := h.DefineXML(ctx, "<domain/>"); return err }},
		{"Start", func() error { return h.Start(ctx, "x") }},
		{"UpdateDevice", func() error { return h.UpdateDevice(ctx, "x", "<disk/>", 0) }},
		{"ListDomains", func() error { _, err := h.ListDomains(ctx); return err }},
	}
	for _, c := range calls {
		if err := c.call(); !IsDisconnected(err) || IsNotFound(err) {
			t.Errorf("%s while disconnected: %v, want ErrDisconnected", c.name, err)
		}
	}
	if h.Connected() {
		t.Error("Connected() = true while disconnected")
	}
	close(block)
	waitEvent(t, h, isEvent(EventReconnected, ""), "reconnected")
	if _, err := h.ListDomains(ctx); err != nil {
		t.Errorf("ListDomains after reconnect: %v", err)
	}
}

func TestHostRetryInitialConnect(t *testing.T) {
	release := make(chan struct{})
	var dials atomic.Int32
	dial := func(uri string) (*libvirt.Connect, error) {
		if dials.Add(1) == 1 {
			return nil, libvirt.Error{Code: libvirt.ERR_SYSTEM_ERROR, Domain: libvirt.FROM_RPC, Message: "injected: daemon not up", Level: libvirt.ERR_ERROR}
		}
		<-release
		return libvirt.NewConnect(uri)
	}
	if _, err := openHost("test:///default", HostOptions{}, dial); err == nil || !strings.Contains(err.Error(), "daemon not up") {
		t.Fatalf("without RetryInitialConnect: err = %v, want the dial error", err)
	}
	dials.Store(0)
	h, err := openHost("test:///default", HostOptions{RetryInitialConnect: true, MinBackoff: time.Millisecond}, dial)
	if err != nil {
		t.Fatalf("with RetryInitialConnect: %v", err)
	}
	defer h.Close()
	waitEvent(t, h, isEvent(EventDisconnected, ""), "disconnected")
	if _, err := h.ListDomains(context.Background()); !IsDisconnected(err) {
		t.Errorf("call before the first connection: %v, want ErrDisconnected", err)
	}
	close(release)
	waitEvent(t, h, isEvent(EventReconnected, ""), "reconnected")
	if _, err := h.ListDomains(context.Background()); err != nil {
		t.Errorf("call after connecting: %v", err)
	}
	if got := h.Reconnects(); got != 1 {
		t.Errorf("Reconnects = %d, want 1", got)
	}
}

// TestHostConcurrentCallsDuringReconnects runs calls from several goroutines
// while the connection is dropped and re-established repeatedly: every call
// either succeeds or fails as disconnected, and nothing deadlocks.
func TestHostConcurrentCallsDuringReconnects(t *testing.T) {
	h, err := OpenHost("test:///default", HostOptions{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	go func() { // drain events so the queue stays small
		for range h.Events() {
		}
	}()
	ctx := context.Background()
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if _, err := h.ListDomains(ctx); err != nil && !IsDisconnected(err) {
					errs <- err
					return
				}
			}
		}()
	}
	const rounds = 20
	for r := uint64(1); r <= rounds; r++ {
		h.mu.RLock()
		gen := h.gen
		h.mu.RUnlock()
		h.reportLost(gen)
		deadline := time.Now().Add(eventBound)
		for h.Reconnects() < r {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no reconnect within %v", r, eventBound)
			}
			time.Sleep(time.Millisecond)
		}
	}
	close(stop)
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Errorf("call failed with a non-transient error: %v", err)
		}
	}
}

func TestErrorClassifiers(t *testing.T) {
	lv := func(code libvirt.ErrorNumber, dom libvirt.ErrorDomain, msg string) error {
		return fmt.Errorf("doing something: %w", libvirt.Error{Code: code, Domain: dom, Message: msg, Level: libvirt.ERR_ERROR})
	}
	tests := []struct {
		name                               string
		err                                error
		notFound, disc, unsupported, trayB bool
	}{
		{"no domain", lv(libvirt.ERR_NO_DOMAIN, libvirt.FROM_QEMU, "Domain not found"), true, false, false, false},
		{"no support", lv(libvirt.ERR_NO_SUPPORT, libvirt.FROM_DOMAIN, "not supported"), false, false, true, false},
		{"operation unsupported", lv(libvirt.ERR_OPERATION_UNSUPPORTED, libvirt.FROM_QEMU, "x"), false, false, true, false},
		{"tray not open", lv(libvirt.ERR_INTERNAL_ERROR, libvirt.FROM_QEMU, "internal error: unable to execute QEMU command 'blockdev-remove-medium': Tray of device 'ua-vmpayload' is not open"), false, false, false, true},
		{"tray timeout", lv(libvirt.ERR_OPERATION_FAILED, libvirt.FROM_QEMU, "timed out waiting to open tray of 'hdc'"), false, false, false, true},
		{"other internal", lv(libvirt.ERR_INTERNAL_ERROR, libvirt.FROM_QEMU, "Bus 'ide.0' does not support hotplugging"), false, false, false, false},
		{"disconnected", fmt.Errorf("x: %w: %w", ErrDisconnected, libvirt.Error{Code: libvirt.ERR_RPC}), false, true, false, false},
		{"plain", errors.New("plain"), false, false, false, false},
		{"nil", nil, false, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if IsNotFound(tt.err) != tt.notFound || IsDisconnected(tt.err) != tt.disc ||
				IsUnsupported(tt.err) != tt.unsupported || IsTrayBusy(tt.err) != tt.trayB {
				t.Errorf("%v: notFound=%v disconnected=%v unsupported=%v trayBusy=%v", tt.err,
					IsNotFound(tt.err), IsDisconnected(tt.err), IsUnsupported(tt.err), IsTrayBusy(tt.err))
			}
		})
	}
}

func BenchmarkHostDomain(b *testing.B) {
	h, err := OpenHost(nodeURIb(b), HostOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	for b.Loop() {
		if _, err := h.Domain(ctx, "6695eb01-f6a4-8304-79aa-97f2502e193f"); err != nil {
			b.Fatal(err)
		}
	}
}

func nodeURIb(b *testing.B) string {
	abs, err := filepath.Abs(filepath.Join("testdata", "node.xml"))
	if err != nil {
		b.Fatal(err)
	}
	return "test://" + abs
}

// TestHostHandleCache checks the domain handle cache on test:///default,
// whose state lives in its connection: a handle cached on a connection is
// never used on the next one (the domain it stands for exists only on the
// old connection, which the handle would keep alive), an undefined domain's
// handle is released, and Close releases them all.
func TestHostHandleCache(t *testing.T) {
	h, err := openHost("test:///default", HostOptions{MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}, libvirt.NewConnect)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()

	a := define(t, h, "vmpx-cache-a")
	b := define(t, h, "vmpx-cache-b")
	if n := h.cachedHandles(); n != 2 {
		t.Fatalf("cached handles after two definitions = %d, want 2", n)
	}
	if err := h.Start(ctx, a.UUID); err != nil {
		t.Fatalf("Start on the cached handle: %v", err)
	}
	if d, err := h.Domain(ctx, a.UUID); err != nil || !d.Active {
		t.Fatalf("Domain after Start = %+v, %v; want active", d, err)
	}
	if d, err := h.Domain(ctx, b.Name); err != nil || d.Active {
		t.Fatalf("Domain of the stopped one = %+v, %v; want not active", d, err)
	}

	// Undefined: its handle goes.
	if err := h.Undefine(ctx, b.UUID); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, h, isEvent(EventUndefined, b.UUID), "undefined")
	if n := h.cachedHandles(); n != 1 {
		t.Errorf("cached handles after an undefine = %d, want 1", n)
	}

	// A new connection: the old one's handles are released and not used.
	h.mu.RLock()
	gen := h.gen
	h.mu.RUnlock()
	h.reportLost(gen)
	waitEvent(t, h, isEvent(EventReconnected, ""), "reconnected")
	if n := h.cachedHandles(); n != 0 {
		t.Errorf("cached handles after a reconnect = %d, want 0", n)
	}
	if _, err := h.LiveXML(ctx, a.UUID); !IsNotFound(err) {
		t.Errorf("LiveXML of a domain of the old connection = %v, want not found (the new connection's test driver does not have it)", err)
	}
	c := define(t, h, "vmpx-cache-c")
	if err := h.Start(ctx, c.UUID); err != nil {
		t.Fatalf("Start after the reconnect: %v", err)
	}
	if n := h.cachedHandles(); n != 1 {
		t.Errorf("cached handles on the new connection = %d, want 1", n)
	}
	h.Close()
	if n := h.cachedHandles(); n != 0 {
		t.Errorf("cached handles after Close = %d, want 0", n)
	}
}

// cachedHandles counts the handles in the cache (for tests).
func (h *LibvirtHost) cachedHandles() int {
	h.hmu.Lock()
	defer h.hmu.Unlock()
	return len(h.handles)
}
