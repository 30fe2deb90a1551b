package libvirtx

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrTimeout is matched (errors.Is) by the errors of calls a Bounded host
// gave up on.
var ErrTimeout = errors.New("libvirt did not answer in time")

// TimeoutError is a call a Bounded host gave up on.
type TimeoutError struct {
	// Call names the Host method, as the metrics label it: "domain",
	// "define_xml", "start", ...
	Call string
	// Op says what the call was doing, e.g. "defining domain".
	Op    string
	After time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: libvirt did not answer within %s (libvirt_timeout); the call may still complete, the connection is reopened", e.Op, e.After)
}

// Is makes errors.Is(err, ErrTimeout) true.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// Suspecter is implemented by hosts that can drop a connection that stopped
// answering and open a new one (LibvirtHost).
type Suspecter interface {
	Suspect()
}

// Bounded wraps h so that every call returns within d: libvirt's C calls
// cannot be cancelled, so each runs in its own goroutine, and when d passes
// (before the caller's ctx ends) the call returns a *TimeoutError at once,
// onTimeout (if not nil) is told the call (TimeoutError.Call), and h, when it is a
// Suspecter, reopens its connection. The abandoned goroutine ends when
// libvirt answers or the old connection dies. d <= 0 returns h unchanged.
func Bounded(h Host, d time.Duration, onTimeout func(call string)) Host {
	if d <= 0 {
		return h
	}
	return &bounded{h: h, d: d, onTimeout: onTimeout}
}

type bounded struct {
	h         Host
	d         time.Duration
	onTimeout func(call string)
}

// call runs fn with a deadline of b.d.
func call[T any](ctx context.Context, b *bounded, name, op string, fn func(ctx context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, b.d)
	type out struct {
		v   T
		err error
	}
	ch := make(chan out, 1) // buffered: an abandoned call never blocks
	go func() {
		v, err := fn(cctx)
		ch <- out{v, err}
	}()
	var o out
	select {
	case o = <-ch:
		if o.err == nil || cctx.Err() == nil {
			cancel()
			return o.v, o.err
		}
		// fn gave up because of our deadline: a timeout as well.
	case <-cctx.Done():
	}
	cancel()
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("%s: %w", op, err)
	}
	if b.onTimeout != nil {
		b.onTimeout(name)
	}
	if s, ok := b.h.(Suspecter); ok {
		s.Suspect()
	}
	return zero, &TimeoutError{Call: name, Op: op, After: b.d}
}

func call0(ctx context.Context, b *bounded, name, op string, fn func(ctx context.Context) error) error {
	_, err := call(ctx, b, name, op, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}

func (b *bounded) Domain(ctx context.Context, nameOrUUID string) (DomainInfo, error) {
	return call(ctx, b, "domain", "looking up domain "+nameOrUUID, func(ctx context.Context) (DomainInfo, error) { return b.h.Domain(ctx, nameOrUUID) })
}

func (b *bounded) DefineXML(ctx context.Context, xml string) (DomainInfo, error) {
	return call(ctx, b, "define_xml", "defining domain", func(ctx context.Context) (DomainInfo, error) { return b.h.DefineXML(ctx, xml) })
}

// Redefine implements Redefiner (the timeout is define_xml's).
func (b *bounded) Redefine(ctx context.Context, xml string) error {
	return call0(ctx, b, "define_xml", "defining domain", func(ctx context.Context) error { return Redefine(ctx, b.h, xml) })
}

// SetLiveMetadata implements LiveMetadataSetter when the bounded host does
// (the timeout is define_xml's: it changes the definition).
func (b *bounded) SetLiveMetadata(ctx context.Context, uuid, element, key, uri string) error {
	s, ok := b.h.(LiveMetadataSetter)
	if !ok {
		return nil
	}
	return call0(ctx, b, "define_xml", "setting live metadata of domain "+uuid, func(ctx context.Context) error { return s.SetLiveMetadata(ctx, uuid, element, key, uri) })
}

func (b *bounded) Start(ctx context.Context, uuid string) error {
	return call0(ctx, b, "start", "starting domain "+uuid, func(ctx context.Context) error { return b.h.Start(ctx, uuid) })
}

func (b *bounded) LiveXML(ctx context.Context, uuid string) (string, error) {
	return call(ctx, b, "live_xml", "reading the live definition of domain "+uuid, func(ctx context.Context) (string, error) { return b.h.LiveXML(ctx, uuid) })
}

func (b *bounded) SavedXML(ctx context.Context, uuid string) (string, error) {
	return call(ctx, b, "saved_xml", "reading the managed save image of domain "+uuid, func(ctx context.Context) (string, error) { return b.h.SavedXML(ctx, uuid) })
}

func (b *bounded) Reset(ctx context.Context, uuid string) error {
	return call0(ctx, b, "reset", "resetting domain "+uuid, func(ctx context.Context) error { return b.h.Reset(ctx, uuid) })
}

func (b *bounded) UpdateDevice(ctx context.Context, uuid, deviceXML string, flags DomainDeviceModifyFlags) error {
	return call0(ctx, b, "update_device", "updating a device of domain "+uuid, func(ctx context.Context) error { return b.h.UpdateDevice(ctx, uuid, deviceXML, flags) })
}

func (b *bounded) AttachDevice(ctx context.Context, uuid, deviceXML string, flags DomainDeviceModifyFlags) error {
	return call0(ctx, b, "attach_device", "attaching a device to domain "+uuid, func(ctx context.Context) error { return b.h.AttachDevice(ctx, uuid, deviceXML, flags) })
}

func (b *bounded) DetachDevice(ctx context.Context, uuid, deviceXML string, flags DomainDeviceModifyFlags) error {
	return call0(ctx, b, "detach_device", "detaching a device from domain "+uuid, func(ctx context.Context) error { return b.h.DetachDevice(ctx, uuid, deviceXML, flags) })
}

func (b *bounded) ListDomains(ctx context.Context) ([]DomainInfo, error) {
	return call(ctx, b, "list_domains", "listing domains", func(ctx context.Context) ([]DomainInfo, error) { return b.h.ListDomains(ctx) })
}

func (b *bounded) Events() <-chan Event { return b.h.Events() }
func (b *bounded) Reconnects() uint64   { return b.h.Reconnects() }
func (b *bounded) Close() error         { return b.h.Close() }

// Connected reports the wrapped host's connection state when it knows it.
func (b *bounded) Connected() bool {
	if c, ok := b.h.(interface{ Connected() bool }); ok {
		return c.Connected()
	}
	return true
}
