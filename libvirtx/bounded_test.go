package libvirtx

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// scriptHost is a Host whose every call waits for release (or its ctx when
// honourCtx) and then returns err; it counts Suspect calls.
type scriptHost struct {
	release   chan struct{}
	honourCtx bool
	err       error
	suspects  atomic.Int32
}

func (s *scriptHost) wait(ctx context.Context) error {
	if s.release == nil {
		return s.err
	}
	if s.honourCtx {
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		<-s.release // like a C call: deaf to ctx
	}
	return s.err
}

func (s *scriptHost) Domain(ctx context.Context, n string) (DomainInfo, error) {
	return DomainInfo{Name: n}, s.wait(ctx)
}
func (s *scriptHost) DefineXML(ctx context.Context, x string) (DomainInfo, error) {
	return DomainInfo{Name: "defined"}, s.wait(ctx)
}
func (s *scriptHost) Start(ctx context.Context, u string) error { return s.wait(ctx) }
func (s *scriptHost) LiveXML(ctx context.Context, u string) (string, error) {
	return "<domain/>", s.wait(ctx)
}
func (s *scriptHost) SavedXML(ctx context.Context, u string) (string, error) {
	return "", s.wait(ctx)
}
func (s *scriptHost) Reset(ctx context.Context, u string) error { return s.wait(ctx) }
func (s *scriptHost) UpdateDevice(ctx context.Context, u, x string, f DomainDeviceModifyFlags) error {
	return s.wait(ctx)
}
func (s *scriptHost) AttachDevice(ctx context.Context, u, x string, f DomainDeviceModifyFlags) error {
	return s.wait(ctx)
}
func (s *scriptHost) DetachDevice(ctx context.Context, u, x string, f DomainDeviceModifyFlags) error {
	return s.wait(ctx)
}
func (s *scriptHost) ListDomains(ctx context.Context) ([]DomainInfo, error) {
	return []DomainInfo{{Name: "a"}}, s.wait(ctx)
}
func (s *scriptHost) Events() <-chan Event { return nil }
func (s *scriptHost) Reconnects() uint64   { return 0 }
func (s *scriptHost) Close() error         { return nil }
func (s *scriptHost) Suspect()             { s.suspects.Add(1) }

// boundedCalls are every Host call of a bounded host, by TimeoutError.Call.
var boundedCalls = []struct {
	call string
	do   func(ctx context.Context, h Host) error
}{
	{"domain", func(ctx context.Context, h Host) error { _, err := h.Domain(ctx, "d"); return err }},
	{"define_xml", func(ctx context.Context, h Host) error { _, err := h.DefineXML(ctx, "<domain/>"); return err }},
	{"start", func(ctx context.Context, h Host) error { return h.Start(ctx, "u") }},
	{"live_xml", func(ctx context.Context, h Host) error { _, err := h.LiveXML(ctx, "u"); return err }},
	{"saved_xml", func(ctx context.Context, h Host) error { _, err := h.SavedXML(ctx, "u"); return err }},
	{"reset", func(ctx context.Context, h Host) error { return h.Reset(ctx, "u") }},
	{"update_device", func(ctx context.Context, h Host) error { return h.UpdateDevice(ctx, "u", "<disk/>", 0) }},
	{"attach_device", func(ctx context.Context, h Host) error { return h.AttachDevice(ctx, "u", "<disk/>", 0) }},
	{"detach_device", func(ctx context.Context, h Host) error { return h.DetachDevice(ctx, "u", "<disk/>", 0) }},
	{"list_domains", func(ctx context.Context, h Host) error { _, err := h.ListDomains(ctx); return err }},
}

func TestBoundedTimesOutEveryCall(t *testing.T) {
	for _, honour := range []bool{false, true} {
		for _, c := range boundedCalls {
			name := c.call
			if honour {
				name += "/honours_ctx"
			}
			t.Run(name, func(t *testing.T) {
				fake := &scriptHost{release: make(chan struct{}), honourCtx: honour}
				defer close(fake.release) // lets the abandoned call end
				var timedOut []string
				h := Bounded(fake, 50*time.Millisecond, func(call string) { timedOut = append(timedOut, call) })
				t0 := time.Now()
				err := c.do(context.Background(), h)
				if d := time.Since(t0); d > 2*time.Second {
					t.Errorf("call returned after %s; want about 50ms", d)
				}
				var te *TimeoutError
				if !errors.As(err, &te) || !errors.Is(err, ErrTimeout) {
					t.Fatalf("err = %v; want a TimeoutError", err)
				}
				if te.Call != c.call || te.After != 50*time.Millisecond || te.Op == "" {
					t.Errorf("TimeoutError = %+v; want call %q after 50ms with an operation", te, c.call)
				}
				if IsDisconnected(err) {
					t.Errorf("a timeout must not read as a disconnection (the engine would retry it): %v", err)
				}
				if len(timedOut) != 1 || timedOut[0] != c.call {
					t.Errorf("onTimeout got %v; want [%s]", timedOut, c.call)
				}
				if n := fake.suspects.Load(); n != 1 {
					t.Errorf("Suspect called %d times; want 1", n)
				}
			})
		}
	}
}

func TestBoundedPassesThrough(t *testing.T) {
	boom := errors.New("libvirt said no")
	tests := []struct {
		name    string
		err     error
		release bool
	}{
		{"answers at once", nil, false},
		{"refuses at once", boom, false},
		{"answers before the deadline", nil, true},
	}
	for _, tt := range tests {
		for _, c := range boundedCalls {
			t.Run(tt.name+"/"+c.call, func(t *testing.T) {
				fake := &scriptHost{err: tt.err}
				if tt.release {
					fake.release = make(chan struct{})
					time.AfterFunc(10*time.Millisecond, func() { close(fake.release) })
				}
				h := Bounded(fake, time.Second, func(string) { t.Error("onTimeout called") })
				if err := c.do(context.Background(), h); !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
					t.Errorf("err = %v; want %v", err, tt.err)
				}
				if fake.suspects.Load() != 0 {
					t.Error("Suspect called for a call that answered")
				}
			})
		}
	}
}

func TestBoundedCallerCancel(t *testing.T) {
	fake := &scriptHost{release: make(chan struct{})}
	defer close(fake.release)
	h := Bounded(fake, time.Hour, func(string) { t.Error("onTimeout called on the caller's cancel") })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err := h.Start(ctx, "u")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v; want the caller's context error, not a libvirt timeout", err)
	}
	if fake.suspects.Load() != 0 {
		t.Error("the connection was made suspect by the caller's cancel")
	}
}

func TestBoundedZeroIsUnbounded(t *testing.T) {
	fake := &scriptHost{}
	if h := Bounded(fake, 0, nil); h != Host(fake) {
		t.Errorf("Bounded(h, 0) = %T; want h itself", h)
	}
}

// TestHostSuspectReconnects: a suspect connection is replaced by a new one
// while calls keep working, and a call in flight on the old connection
// (holding its own reference) does not keep the supervisor from it.
func TestHostSuspectReconnects(t *testing.T) {
	h, err := OpenHost("test:///default", HostOptions{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	if _, err := h.ListDomains(ctx); err != nil {
		t.Fatal(err)
	}
	h.Suspect()
	deadline := time.Now().Add(10 * time.Second)
	for h.Reconnects() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no reconnection after Suspect")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for time.Now().Before(deadline) {
		if _, err := h.ListDomains(ctx); err == nil {
			return
		} else if !IsDisconnected(err) {
			t.Fatalf("call after reconnection: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("calls do not work after the reconnection")
}
