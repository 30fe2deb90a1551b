package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
)

// waitBackend answers Wait with a job whose guest is pending and
// WaitGuest with its report, recording which was called.
type waitBackend struct {
	Backend
	calls []string
}

func (b *waitBackend) Wait(ctx context.Context, id string) (result.Result, bool) {
	b.calls = append(b.calls, "job")
	return result.Result{ID: id, State: result.StateDone, Guest: &result.Guest{Status: result.GuestPending}}, true
}

func (b *waitBackend) WaitGuest(ctx context.Context, id string) (result.Result, bool) {
	b.calls = append(b.calls, "guest")
	return result.Result{ID: id, State: result.StateDone, Guest: &result.Guest{Status: result.GuestDone}}, true
}

var _ GuestWaiter = (*waitBackend)(nil)

func TestGetWaitForGuest(t *testing.T) {
	for _, tc := range []struct {
		query, call, status string
		code                int
	}{
		{"?wait=1s", "job", result.GuestPending, http.StatusOK},
		{"?wait=1s&for=job", "job", result.GuestPending, http.StatusOK},
		{"?wait=1s&for=guest", "guest", result.GuestDone, http.StatusOK},
		{"?wait=1s&for=soon", "", "", http.StatusBadRequest},
	} {
		b := &waitBackend{}
		s := &Server{Backend: b}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/jobs/j1"+tc.query, nil))
		if rec.Code != tc.code {
			t.Errorf("%s: HTTP %d, want %d: %s", tc.query, rec.Code, tc.code, rec.Body)
			continue
		}
		if tc.code != http.StatusOK {
			if len(b.calls) != 0 {
				t.Errorf("%s: waited (%v) on a bad request", tc.query, b.calls)
			}
			continue
		}
		var r result.Result
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Guest == nil || r.Guest.Status != tc.status {
			t.Errorf("%s: %s (%v)", tc.query, rec.Body, err)
		}
		if len(b.calls) != 1 || b.calls[0] != tc.call {
			t.Errorf("%s: calls %v, want %s", tc.query, b.calls, tc.call)
		}
	}
}
