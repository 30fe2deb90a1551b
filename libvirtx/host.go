package libvirtx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"libvirt.org/go/libvirt"
)

// ErrDisconnected is wrapped by errors of Host calls made while the
// connection to libvirtd is down (or that found it broken). Such errors are
// transient: the host reconnects by itself, so the caller should retry later.
var ErrDisconnected = errors.New("libvirt connection is down")

// ErrClosed is returned by Host calls after Close.
var ErrClosed = errors.New("libvirt host is closed")

// ErrNotInstalled is wrapped by OpenHost's error when the binary was built
// with the libvirt_dlopen tag and libvirt's client library (libvirt.so.0)
// cannot be loaded; the loader's reason follows it in the message.
var ErrNotInstalled = errors.New("libvirt is not installed")

// IsNotFound reports whether err says the domain does not exist.
func IsNotFound(err error) bool {
	var le libvirt.Error
	return errors.As(err, &le) && le.Code == libvirt.ERR_NO_DOMAIN
}

// IsDisconnected reports whether err is transient because the connection to
// libvirtd was lost (see ErrDisconnected).
func IsDisconnected(err error) bool {
	return errors.Is(err, ErrDisconnected)
}

// IsUnsupported reports whether the driver does not support the operation
// (e.g. device changes on test:///default, IDE/SATA hotplug on qemu).
func IsUnsupported(err error) bool {
	var le libvirt.Error
	if !errors.As(err, &le) {
		return false
	}
	switch le.Code {
	case libvirt.ERR_NO_SUPPORT, libvirt.ERR_OPERATION_UNSUPPORTED, libvirt.ERR_CONFIG_UNSUPPORTED:
		return true
	}
	return false
}

// IsTrayBusy reports whether a live media change failed because QEMU could
// not get the CD-ROM tray open or keep it open: the guest is using the drive
// (firmware probing it at POST, an OS that locked or closed the tray). It is
// usually transient, so retry a bounded number of times. libvirt 9.0 reports
// it as an internal error, so the message is what identifies it. It also
// persists for drives hot-plugged in the current run: fall back to detach +
// attach there.
func IsTrayBusy(err error) bool {
	var le libvirt.Error
	if !errors.As(err, &le) {
		return false
	}
	m := strings.ToLower(le.Message)
	return strings.Contains(m, "tray") && (strings.Contains(m, "not open") || strings.Contains(m, "timed out"))
}

// connectionBroken reports whether a libvirt error may mean the connection
// itself failed, so that it is worth asking IsAlive.
func connectionBroken(err error) bool {
	var le libvirt.Error
	if !errors.As(err, &le) {
		return false
	}
	switch le.Code {
	case libvirt.ERR_RPC, libvirt.ERR_NO_CONNECT, libvirt.ERR_INVALID_CONN, libvirt.ERR_SYSTEM_ERROR, libvirt.ERR_OPERATION_TIMEOUT:
		return true
	}
	return le.Domain == libvirt.FROM_RPC || le.Domain == libvirt.FROM_REMOTE
}

// Host event types. The first four are domain lifecycle events; the last two
// describe the connection. After EventReconnected, events that happened while
// disconnected are lost: rescan with ListDomains.
const (
	EventDefined EventType = iota + 1
	EventUndefined
	EventStarted
	EventStopped
	EventDisconnected
	EventReconnected
)

// DomainInfo describes a domain as the agent sees it.
type DomainInfo struct {
	Name   string
	UUID   string
	Active bool
	// InactiveXML is the persistent definition (DOMAIN_XML_INACTIVE), the one
	// to edit and redefine.
	InactiveXML string
}

// Host is what the agent needs from libvirt. It is the seam that lets the
// agent be tested without a daemon. All methods are safe for concurrent use.
// Errors can be classified with IsNotFound, IsDisconnected and IsUnsupported.
type Host interface {
	// Domain looks a domain up by UUID (when the argument looks like one) or
	// by name.
	Domain(ctx context.Context, nameOrUUID string) (DomainInfo, error)
	// DefineXML defines or redefines a persistent domain.
	DefineXML(ctx context.Context, xml string) (DomainInfo, error)
	// Start boots a defined domain.
	Start(ctx context.Context, uuid string) error
	// LiveXML returns the running domain's live definition (flags 0): what
	// libvirt believes the running QEMU holds, e.g. a drive's tray state.
	LiveXML(ctx context.Context, uuid string) (string, error)
	// SavedXML returns the domain XML held in a shut-off domain's managed
	// save image (virsh managedsave): what its next start resumes with,
	// media included, whatever its persistent definition says since. ""
	// when the domain has no managed save image (or is running).
	SavedXML(ctx context.Context, uuid string) (string, error)
	// Reset resets a running domain's virtual machine at once (no guest
	// shutdown); libvirt re-reads its disks' state from QEMU afterwards.
	Reset(ctx context.Context, uuid string) error
	// UpdateDevice changes a device in place, e.g. a CD-ROM's medium.
	UpdateDevice(ctx context.Context, uuid, deviceXML string, flags DomainDeviceModifyFlags) error
	// AttachDevice adds a device.
	AttachDevice(ctx context.Context, uuid, deviceXML string, flags DomainDeviceModifyFlags) error
	// DetachDevice removes a device.
	DetachDevice(ctx context.Context, uuid, deviceXML string, flags DomainDeviceModifyFlags) error
	// ListDomains lists every domain, active or not.
	ListDomains(ctx context.Context) ([]DomainInfo, error)
	// Events delivers lifecycle events of all domains and connection events,
	// in order. It is closed by Close.
	Events() <-chan Event
	// Reconnects counts successful reconnections since the host was opened.
	Reconnects() uint64
	// Close stops reconnecting, closes the connection and the Events channel.
	Close() error
}

// HostOptions tune a LibvirtHost. Zero values pick the defaults.
type HostOptions struct {
	// Logger receives connection state changes. Default slog.Default().
	Logger *slog.Logger
	// KeepAliveInterval is the keepalive period in seconds (default 5) and
	// KeepAliveCount the unanswered messages before the connection is
	// declared dead (default 3).
	KeepAliveInterval int
	KeepAliveCount    uint
	// MinBackoff and MaxBackoff bound the delay between reconnection attempts
	// (defaults 100ms and 5s); the delay doubles after each failure.
	MinBackoff, MaxBackoff time.Duration
	// MaxQueuedEvents caps events waiting to be read from Events (default
	// 65536); beyond it the oldest are dropped with a warning.
	MaxQueuedEvents int
	// RetryInitialConnect makes OpenHost succeed even when the first
	// connection fails: the host starts disconnected (calls fail with
	// ErrDisconnected) and connects in the background, counting that as a
	// reconnect and sending EventReconnected.
	RetryInitialConnect bool
}

func (o *HostOptions) defaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.KeepAliveInterval <= 0 {
		o.KeepAliveInterval = 5
	}
	if o.KeepAliveCount == 0 {
		o.KeepAliveCount = 3
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Second, o.MinBackoff)
	}
	if o.MaxQueuedEvents <= 0 {
		o.MaxQueuedEvents = 65536
	}
}

// LibvirtHost implements Host over one libvirt connection, kept for the
// host's whole life and replaced only when it is lost (libvirtd restart,
// keepalive timeout): the test driver's state lives in its connection.
type LibvirtHost struct {
	uri  string
	opts HostOptions
	log  *slog.Logger

	// dial opens a connection; tests replace it to inject failures.
	dial func(uri string) (*libvirt.Connect, error)

	mu     sync.RWMutex     // guards conn, gen, cbID, closed; read-held during calls
	conn   *libvirt.Connect // nil while disconnected
	gen    uint64           // generation of conn
	cbID   int              // lifecycle callback id on conn
	closed bool

	nextGen    atomic.Uint64
	reconnects atomic.Uint64
	lost       chan uint64 // generations reported lost; never blocks callbacks
	done       chan struct{}
	wg         sync.WaitGroup
	closeOnce  sync.Once

	// hmu guards the domain handle cache (see cachedHandle): handles of
	// connection generation handlesGen by UUID; generations up to deadGen
	// were torn down and are never cached again.
	hmu        sync.Mutex
	handles    map[string]*libvirt.Domain
	handlesGen uint64
	deadGen    uint64

	evMu     sync.Mutex
	evQueue  []Event
	evSignal chan struct{}
	events   chan Event
}

var _ Host = (*LibvirtHost)(nil)

// OpenHost connects to uri ("qemu:///system", "test:///default", ...) and
// starts the event loop, event delivery and the reconnection supervisor. The
// first connection must succeed unless opts.RetryInitialConnect is set;
// later losses are repaired in the background. A missing libvirt client
// library fails at once with ErrNotInstalled, whatever the options.
func OpenHost(uri string, opts HostOptions) (*LibvirtHost, error) {
	return openHost(uri, opts, libvirt.NewConnect)
}

func openHost(uri string, opts HostOptions, dial func(string) (*libvirt.Connect, error)) (*LibvirtHost, error) {
	opts.defaults()
	if err := libvirtLoadable(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	if err := startEventLoop(); err != nil {
		return nil, err
	}
	h := &LibvirtHost{
		uri:      uri,
		opts:     opts,
		log:      opts.Logger.With("uri", uri),
		dial:     dial,
		lost:     make(chan uint64, 16),
		done:     make(chan struct{}),
		evSignal: make(chan struct{}, 1),
		events:   make(chan Event),
	}
	conn, gen, cbID, err := h.connect()
	down := false
	switch {
	case err == nil:
		h.conn, h.gen, h.cbID = conn, gen, cbID
	case opts.RetryInitialConnect:
		h.log.Warn("libvirt not reachable yet; retrying in the background", "err", err)
		h.emit(Event{Type: EventDisconnected})
		down = true
	default:
		return nil, err
	}
	h.wg.Add(2)
	go h.supervise(down)
	go h.pump()
	return h, nil
}

// connect opens a connection and registers keepalive, the close callback and
// lifecycle events on it.
func (h *LibvirtHost) connect() (*libvirt.Connect, uint64, int, error) {
	conn, err := h.dial(h.uri)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("connecting to libvirt at %s: %w", h.uri, err)
	}
	gen := h.nextGen.Add(1)
	if err := conn.SetKeepAlive(h.opts.KeepAliveInterval, h.opts.KeepAliveCount); err != nil {
		if !IsUnsupported(err) {
			conn.Close()
			return nil, 0, 0, fmt.Errorf("enabling keepalive on %s: %w", h.uri, err)
		}
		h.log.Debug("libvirt driver has no keepalive", "err", err)
	}
	if err := conn.RegisterCloseCallback(func(_ *libvirt.Connect, reason libvirt.ConnectCloseReason) {
		h.log.Warn("libvirt connection closed", "reason", closeReasonName(reason))
		h.reportLost(gen)
	}); err != nil {
		conn.Close()
		return nil, 0, 0, fmt.Errorf("registering close callback on %s: %w", h.uri, err)
	}
	cbID, err := conn.DomainEventLifecycleRegister(nil, h.onLifecycle)
	if err != nil {
		conn.UnregisterCloseCallback()
		conn.Close()
		return nil, 0, 0, fmt.Errorf("registering lifecycle events on %s: %w", h.uri, err)
	}
	return conn, gen, cbID, nil
}

// teardown releases a connection that is being dropped. Errors are expected
// when the peer is gone and are only logged.
func (h *LibvirtHost) teardown(conn *libvirt.Connect, cbID int) {
	if err := conn.DomainEventDeregister(cbID); err != nil {
		h.log.Debug("deregistering lifecycle events", "err", err)
	}
	if err := conn.UnregisterCloseCallback(); err != nil {
		h.log.Debug("unregistering close callback", "err", err)
	}
	if _, err := conn.Close(); err != nil {
		h.log.Debug("closing libvirt connection", "err", err)
	}
}

// reportLost tells the supervisor that connection generation gen failed. It
// never blocks: it may run inside libvirt callbacks or calls.
func (h *LibvirtHost) reportLost(gen uint64) {
	select {
	case h.lost <- gen:
	default:
	}
}

// supervise drops lost connections and reconnects with backoff. down says
// the host starts without a connection (HostOptions.RetryInitialConnect).
func (h *LibvirtHost) supervise(down bool) {
	defer h.wg.Done()
	for {
		if down {
			if !h.redial() {
				return
			}
			down = false
		}
		var gen uint64
		select {
		case <-h.done:
			return
		case gen = <-h.lost:
		}
		h.mu.Lock()
		if h.closed || h.conn == nil || gen != h.gen {
			h.mu.Unlock()
			continue
		}
		old, oldCB := h.conn, h.cbID
		h.conn = nil
		h.mu.Unlock()
		h.log.Warn("libvirt connection lost; reconnecting")
		h.emit(Event{Type: EventDisconnected})
		h.dropHandles(gen)
		h.teardown(old, oldCB)
		down = true
	}
}

// redial connects again, retrying with exponential backoff, and installs the
// new connection. It returns false when the host was closed meanwhile.
func (h *LibvirtHost) redial() bool {
	delay := h.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		conn, gen, cbID, err := h.connect()
		if err == nil {
			h.mu.Lock()
			if h.closed {
				h.mu.Unlock()
				h.teardown(conn, cbID)
				return false
			}
			h.conn, h.gen, h.cbID = conn, gen, cbID
			h.mu.Unlock()
			n := h.reconnects.Add(1)
			h.log.Info("libvirt connection established", "attempts", attempt, "reconnects", n)
			h.emit(Event{Type: EventReconnected})
			return true
		}
		h.log.Debug("connecting to libvirt failed", "attempt", attempt, "retry_in", delay, "err", err)
		select {
		case <-h.done:
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, h.opts.MaxBackoff)
	}
}

// Reconnects implements Host.
func (h *LibvirtHost) Reconnects() uint64 { return h.reconnects.Load() }

// Connected reports whether a connection is currently established.
func (h *LibvirtHost) Connected() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.conn != nil
}

// Close implements Host.
func (h *LibvirtHost) Close() error {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		h.closed = true
		conn, cbID := h.conn, h.cbID
		h.conn = nil
		h.mu.Unlock()
		close(h.done)
		h.wg.Wait()
		h.dropHandles(h.nextGen.Load()) // every generation there was
		if conn != nil {
			h.teardown(conn, cbID)
		}
		close(h.events)
	})
	return nil
}

// withConn runs fn on the current connection. Failures that turn out to be a
// dead connection are reported to the supervisor and wrapped with
// ErrDisconnected.
//
// The call holds its own reference to the connection (virConnectRef) rather
// than the host's lock, so that a call libvirt never answers cannot keep the
// supervisor from replacing a suspect connection (see Suspect): the stuck
// call keeps the old connection alive until it returns.
func (h *LibvirtHost) withConn(ctx context.Context, op string, fn func(c *libvirt.Connect) error) error {
	return h.withConnGen(ctx, op, func(c *libvirt.Connect, _ uint64) error { return fn(c) })
}

// withConnGen is withConn that also tells fn the connection's generation
// (for the handle cache).
func (h *LibvirtHost) withConnGen(ctx context.Context, op string, fn func(c *libvirt.Connect, gen uint64) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	h.mu.RLock()
	conn, gen, closed := h.conn, h.gen, h.closed
	var rerr error
	if conn != nil && !closed {
		rerr = conn.Ref()
	}
	h.mu.RUnlock()
	if closed {
		return fmt.Errorf("%s: %w", op, ErrClosed)
	}
	if conn == nil {
		return fmt.Errorf("%s: %w", op, ErrDisconnected)
	}
	if rerr != nil {
		h.reportLost(gen)
		return fmt.Errorf("%s: %w: %w", op, ErrDisconnected, rerr)
	}
	defer func() {
		if _, err := conn.Close(); err != nil { // drops the reference taken above
			h.log.Debug("releasing libvirt connection reference", "err", err)
		}
	}()
	err := fn(conn, gen)
	if err == nil {
		return nil
	}
	if connectionBroken(err) {
		if alive, aerr := conn.IsAlive(); aerr != nil || !alive {
			h.reportLost(gen)
			return fmt.Errorf("%s: %w: %w", op, ErrDisconnected, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Suspect implements Suspecter: the current connection is dropped and a
// new one opened, as when it is lost.
func (h *LibvirtHost) Suspect() {
	h.mu.RLock()
	gen, up := h.gen, h.conn != nil
	h.mu.RUnlock()
	if up {
		h.log.Warn("libvirt connection suspect (a call did not answer in time); reopening it")
		h.reportLost(gen)
	}
}
