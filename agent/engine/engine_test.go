package engine

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/payload/job"
	"libvirt.org/go/libvirt"
)

// trayHost is a real test-driver host whose live media changes fail as
// QEMU's do while the guest holds the tray shut, for the first busy calls
// (busy < 0: always), and then succeed (the test driver itself has no
// virDomainUpdateDeviceFlags; the real one is exercised against libvirtd in
// libvirtx and agent integration tests).
type trayHost struct {
	libvirtx.Host
	busy  int64
	calls atomic.Int64
}

func (h *trayHost) UpdateDevice(ctx context.Context, uuid, x string, flags libvirtx.DomainDeviceModifyFlags) error {
	n := h.calls.Add(1)
	if h.busy < 0 || n <= h.busy {
		return libvirt.Error{Code: libvirt.ERR_INTERNAL_ERROR, Domain: libvirt.FROM_QEMU,
			Message: "internal error: unable to execute QEMU command 'blockdev-remove-medium': Tray of device 'ua-vmpayload' is not open"}
	}
	return nil
}

// SetLiveMetadata passes on to the wrapped host (libvirtx.LiveMetadataSetter).
func (h *trayHost) SetLiveMetadata(ctx context.Context, uuid, element, key, uri string) error {
	if s, ok := h.Host.(libvirtx.LiveMetadataSetter); ok {
		return s.SetLiveMetadata(ctx, uuid, element, key, uri)
	}
	return nil
}

// TestMediaChangeTrayLocked: a running domain's media change is retried
// while the tray is held shut and succeeds once it opens; a tray that stays
// locked past TrayWait fails the job with media_locked, not a bare libvirt
// error, and the domain keeps its old medium.
func TestMediaChangeTrayLocked(t *testing.T) {
	cases := []struct {
		name      string
		busy      int64
		wantState result.State
		wantCode  string
		minCalls  int64
	}{
		{"tray opens after two refusals", 2, result.StateDone, "", 3},
		{"tray stays locked", -1, result.StateFailed, result.CodeMediaLocked, 2},
	}
	h, err := libvirtx.OpenHost("test:///default", libvirtx.HostOptions{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx := context.Background()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("vmpx-engine-tray-%d-%d", os.Getpid(), i)
			defineTestDomain(t, h, name)
			th := &trayHost{Host: h, busy: c.busy}
			e := &Engine{Host: th, PayloadDir: t.TempDir(), ImageMode: 0o640, ImageGID: -1,
				Log: quietLog(), TrayWait: 2 * time.Second}
			run := func(host string) result.Result { return runJob(t, e, name, host, "") }
			first := run("first")
			if first.State != result.StateDone || th.calls.Load() != 0 {
				t.Fatalf("start job: state %s, %d media changes; %+v", first.State, th.calls.Load(), first.Error)
			}
			second := run("second")
			if second.State != c.wantState {
				t.Fatalf("media change job: state %s, want %s; %+v", second.State, c.wantState, second.Error)
			}
			if th.calls.Load() < c.minCalls {
				t.Errorf("UpdateDevice called %d times, want >= %d", th.calls.Load(), c.minCalls)
			}
			d, err := h.Domain(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if c.wantState == result.StateFailed {
				if second.Error == nil || second.Error.Code != c.wantCode || !strings.Contains(second.Error.Message, "locked") {
					t.Fatalf("error = %+v, want code %s naming the locked tray", second.Error, c.wantCode)
				}
				if !strings.Contains(d.InactiveXML, first.Payload.Path) {
					t.Errorf("definition lost the old medium %s:\n%s", first.Payload.Path, d.InactiveXML)
				}
				if _, err := os.Stat(first.Payload.Path); err != nil {
					t.Errorf("old image removed although still attached: %v", err)
				}
				if ents, _ := os.ReadDir(e.PayloadDir); len(ents) != 1 {
					t.Errorf("payload dir holds %d entries, want only the attached image: %v", len(ents), ents)
				}
			}
		})
	}
}

// staleHost is a real test-driver host whose payload drive is left as
// libvirt 9.0 leaves it when the guest resets the drive during a media change:
// the live XML says tray='open' and every change is refused, until the
// domain is reset. Resets are counted; after each of the first refuseAfterReset resets the
// first change is refused again (the firmware's probing races it again).
type staleHost struct {
	libvirtx.Host
	stale            atomic.Bool
	refuseAfterReset int64
	refused          atomic.Int64
	changes          atomic.Int64
	resets           atomic.Int64
}

func (h *staleHost) LiveXML(ctx context.Context, uuid string) (string, error) {
	d, err := h.Host.Domain(ctx, uuid)
	if err != nil {
		return "", err
	}
	if !h.stale.Load() {
		return d.InactiveXML, nil
	}
	return strings.Replace(d.InactiveXML, "bus='ide'/>", "bus='ide' tray='open'/>", 1), nil
}

func (h *staleHost) UpdateDevice(ctx context.Context, uuid, x string, flags libvirtx.DomainDeviceModifyFlags) error {
	h.changes.Add(1)
	if flags&libvirtx.DOMAIN_DEVICE_MODIFY_FORCE == 0 {
		return fmt.Errorf("media change without FORCE")
	}
	if h.stale.Load() || h.refused.Add(-1) >= 0 {
		h.stale.Store(true)
		return libvirt.Error{Code: libvirt.ERR_INTERNAL_ERROR, Domain: libvirt.FROM_QEMU,
			Message: "internal error: unable to execute QEMU command 'blockdev-remove-medium': Tray of device 'ua-vmpayload' is not open"}
	}
	return nil
}

func (h *staleHost) Reset(ctx context.Context, uuid string) error {
	n := h.resets.Add(1)
	h.stale.Store(false)
	if n <= h.refuseAfterReset {
		h.refused.Store(1)
	} else {
		h.refused.Store(0)
	}
	return nil
}

// TestMediaChangeStaleTray: a drive libvirt believes open while QEMU's tray
// is shut is repaired by a reset when the domain has just started (also when
// the reset's own firmware probing races the change once more), and reported
// as media_locked with the repair when it has run for long.
func TestMediaChangeStaleTray(t *testing.T) {
	cases := []struct {
		name             string
		startedAgo       time.Duration // 0: start unknown
		refuseAfterReset int64
		wantState        result.State
		wantResets       int64
	}{
		{"just started: reset repairs it", time.Second, 0, result.StateDone, 1},
		{"reset races again once", time.Second, 1, result.StateDone, 2},
		{"reset races every time", time.Second, 100, result.StateFailed, maxResets},
		{"running for long: no reset", 10 * time.Minute, 0, result.StateFailed, 0},
		{"start unknown: no reset", 0, 0, result.StateFailed, 0},
	}
	h, err := libvirtx.OpenHost("test:///default", libvirtx.HostOptions{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("vmpx-engine-stale-%d-%d", os.Getpid(), i)
			defineTestDomain(t, h, name)
			sh := &staleHost{Host: h, refuseAfterReset: c.refuseAfterReset}
			sh.refused.Store(1) // the first change races the firmware
			starts := &Starts{}
			e := &Engine{Host: sh, PayloadDir: t.TempDir(), ImageMode: 0o640, ImageGID: -1, Starts: starts,
				Log: quietLog(), TrayWait: 3 * time.Second}
			run := func(host string) result.Result { return runJob(t, e, name, host, "") }
			first := run("first")
			if first.State != result.StateDone {
				t.Fatalf("start job: %+v", first.Error)
			}
			starts.Forget(first.DomainUUID)
			if c.startedAgo > 0 {
				starts.Note(first.DomainUUID, time.Now().Add(-c.startedAgo))
			}
			second := run("second")
			if second.State != c.wantState {
				t.Fatalf("media change: state %s, want %s; %+v", second.State, c.wantState, second.Error)
			}
			if got := sh.resets.Load(); got != c.wantResets {
				t.Errorf("%d resets, want %d", got, c.wantResets)
			}
			if c.wantState == result.StateFailed {
				if second.Error == nil || second.Error.Code != result.CodeMediaLocked || !strings.Contains(second.Error.Message, "virsh reset "+name) {
					t.Errorf("error = %+v, want media_locked telling to run virsh reset %s", second.Error, name)
				}
			}
		})
	}
}

// runJob runs a job giving domain name a payload with hostname host (and
// action, when not "") through e, and returns its result.
func runJob(t *testing.T, e *Engine, name, host, action string) result.Result {
	t.Helper()
	doc := fmt.Sprintf(`{"version":1,"domain":%q,"hostname":%q}`, name, host)
	if action != "" {
		doc = fmt.Sprintf(`{"version":1,"domain":%q,"hostname":%q,"action":%q}`, name, host, action)
	}
	return runDoc(t, e, doc, host)
}

// runDoc runs the job document doc through e as job id and returns its
// result.
func runDoc(t *testing.T, e *Engine, doc, id string) result.Result {
	t.Helper()
	j, rep := job.Parse([]byte(doc))
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	r, err := e.Run(context.Background(), j, result.Result{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRetryCleanups: a failed image removal stays pending and is retried; a
// job that wants the image again cancels it (the image is kept).
func TestRetryCleanups(t *testing.T) {
	dir := t.TempDir()
	e := &Engine{PayloadDir: dir, Cleanups: &Cleanups{}, Log: quietLog()}
	stuck := dir + "/d-1.iso"
	busy := stuck + "/busy" // a non-empty directory: even root cannot unlink it
	if err := os.MkdirAll(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	e.removeImage(stuck, "superseded")
	if n, err := e.RetryCleanups(); n != 1 || err == nil {
		t.Fatalf("RetryCleanups = %d, %v; want 1 pending with its error", n, err)
	}
	e.Cleanups.cancel(stuck)
	if n, _ := e.RetryCleanups(); n != 0 {
		t.Fatalf("%d pending after cancel", n)
	}
	if err := os.Remove(busy); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.RetryCleanups(); n != 0 {
		t.Fatal("cancelled removal came back")
	}
	if _, err := os.Stat(stuck); err != nil {
		t.Fatalf("a cancelled removal removed the image: %v", err)
	}
	e.removeImage(stuck+"x", "superseded") // missing: nothing pending
	if err := os.Mkdir(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	e.removeImage(stuck, "superseded")
	if err := os.Remove(busy); err != nil {
		t.Fatal(err)
	}
	if n, err := e.RetryCleanups(); n != 0 || err != nil {
		t.Fatalf("RetryCleanups after the cause went = %d, %v", n, err)
	}
	if _, err := os.Lstat(stuck); !os.IsNotExist(err) {
		t.Fatalf("image still there: %v", err)
	}
}
