package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	h, err := libvirtx.OpenHost("test:///default", libvirtx.HostOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx := context.Background()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("vmpx-engine-tray-%d-%d", os.Getpid(), i)
			if _, err := h.DefineXML(ctx, fmt.Sprintf(`<domain type='test'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os></domain>`, name)); err != nil {
				t.Fatal(err)
			}
			th := &trayHost{Host: h, busy: c.busy}
			e := &Engine{Host: th, PayloadDir: t.TempDir(), ImageMode: 0o640, ImageGID: -1,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), TrayWait: 2 * time.Second}
			run := func(host string) result.Result {
				t.Helper()
				j, err := job.Decode([]byte(fmt.Sprintf(`{"version":1,"domain":%q,"hostname":%q}`, name, host)))
				if err != nil {
					t.Fatal(err)
				}
				r, err := e.Run(ctx, j, result.Result{ID: host})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
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
