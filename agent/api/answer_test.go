package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

// TestAnswerWireShape pins the bytes of the API's error answers (written
// with client.Answer): "error" first, "errors" only when there are field
// errors, no "id"/"state" keys, two-space indent, trailing newline.
func TestAnswerWireShape(t *testing.T) {
	s := &Server{Backend: &waitBackend{}}
	big := fmt.Sprintf("job document larger than %d bytes", job.MaxJobBytes)
	for _, tc := range []struct {
		name, method, target string
		length               int64
		code                 int
		body                 string
	}{
		{"bad wait", http.MethodGet, "/v1/jobs/j1?wait=soon", 0, http.StatusBadRequest,
			"{\n  \"error\": \"wait=\\\"soon\\\" is not a duration such as 30s\"\n}\n"},
		{"bad for", http.MethodGet, "/v1/jobs/j1?wait=1s&for=x", 0, http.StatusBadRequest,
			"{\n  \"error\": \"for=\\\"x\\\": want job or guest\"\n}\n"},
		{"too large", http.MethodPost, "/v1/jobs", job.MaxJobBytes + 1, http.StatusRequestEntityTooLarge,
			"{\n  \"error\": \"" + big + "\",\n  \"errors\": [\n    {\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.target, strings.NewReader("{}"))
			if tc.length > 0 {
				req.ContentLength = tc.length
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Fatalf("HTTP %d, want %d: %s", rec.Code, tc.code, rec.Body)
			}
			if got := rec.Body.String(); !strings.HasPrefix(got, tc.body) || strings.Contains(got, `"id"`) || strings.Contains(got, `"state"`) {
				t.Errorf("body %q, want it to start with %q and carry no id/state", got, tc.body)
			}
		})
	}
}

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	s.init()
	return s.srv.Handler
}
