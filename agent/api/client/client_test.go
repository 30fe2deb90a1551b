package client_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/api"
	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/test/agenttest"
)

// backend is a fixed api.Backend: job "j1" is done, "bad" documents are
// invalid, everything else is queued as "new".
type backend struct{}

func (backend) SubmitAs(data []byte, _ result.Submitter) (string, error) {
	if string(data) == "bad" {
		return "", &job.ValidationError{Errors: []job.FieldError{{Field: "hostname", Message: `"bad_name" is not a host name`}}}
	}
	return "new", nil
}

func (backend) Job(id string) (result.Result, bool) {
	return result.Result{ID: id, State: result.StateDone}, id == "j1"
}

func (b backend) Wait(_ context.Context, id string) (result.Result, bool) { return b.Job(id) }

func (backend) Jobs(int) []result.Result {
	return []result.Result{{ID: "j1", State: result.StateDone}, {ID: "j2", State: result.StateFailed}}
}

func (backend) Subscribe() (<-chan agent.Event, func()) { return make(chan agent.Event), func() {} }

func (backend) Health() map[string]any { return map[string]any{"status": "ok"} }

// serve runs the real API server with backend on a socket and returns a
// client for it.
func serve(t *testing.T) *client.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := api.Listen(sock, -1)
	if err != nil {
		t.Fatal(err)
	}
	met := metrics.New()
	met.JobReceived("socket")
	met.JobReceived("socket")
	met.JobReceived("spool")
	srv := &api.Server{Backend: backend{}, Metrics: met}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return client.New(sock)
}

func TestClientAgainstTheAPI(t *testing.T) {
	c := serve(t)
	ctx := context.Background()

	ans, status, err := c.Submit(ctx, []byte(`{"version":1}`))
	if err != nil || status != http.StatusAccepted || ans.ID != "new" || ans.State != result.StateQueued {
		t.Errorf("Submit: %+v %d %v, want id new, queued, 202", ans, status, err)
	}
	ans, status, err = c.Submit(ctx, []byte("bad"))
	if err != nil || status != http.StatusBadRequest || len(ans.Errors) != 1 || ans.Errors[0].Field != "hostname" {
		t.Errorf("Submit(bad): %+v %d %v, want 400 naming hostname", ans, status, err)
	}

	if r, status, err := c.Job(ctx, "j1", client.JobQuery{Wait: time.Second}); err != nil || status != http.StatusOK || r.State != result.StateDone {
		t.Errorf("Job(j1): %+v %d %v, want done", r, status, err)
	}
	for _, tc := range []struct {
		id, msg string
		status  int
	}{
		{"nope", `no job "nope"`, http.StatusNotFound},
		{"_x", `"_x" is not a job id`, http.StatusBadRequest},
	} {
		_, status, err := c.Job(ctx, tc.id, client.JobQuery{})
		var se *client.StatusError
		if status != tc.status || !errors.As(err, &se) || se.Status != tc.status || se.Message != tc.msg {
			t.Errorf("Job(%s): %d %v, want a StatusError %d %q", tc.id, status, err, tc.status, tc.msg)
		}
	}
	if r, err := agenttest.WaitFinal(ctx, c, "j1", time.Second, 1); err != nil || r.ID != "j1" {
		t.Errorf("WaitFinal(j1): %+v %v", r, err)
	}
	if _, err := agenttest.WaitFinal(ctx, c, "nope", time.Second, 1); err == nil {
		t.Error("WaitFinal(nope): no error for an unknown job")
	}

	jobs, err := c.Jobs(ctx)
	if err != nil || len(jobs) != 2 || jobs[1].State != result.StateFailed {
		t.Errorf("Jobs: %+v %v", jobs, err)
	}
	if status, h, err := c.Health(ctx); err != nil || status != http.StatusOK || h["status"] != "ok" {
		t.Errorf("Health: %d %v %v", status, h, err)
	}

	for _, tc := range []struct {
		labels []string
		want   float64
		err    error
	}{
		{[]string{`source="socket"`}, 2, nil},
		{[]string{`source="spool"`}, 1, nil},
		{[]string{`source="nowhere"`}, 0, agenttest.ErrNoMetric},
	} {
		v, err := agenttest.Metric(ctx, c, "vmpayload_jobs_received_total", tc.labels...)
		if v != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("Metric(%v) = %v, %v; want %v, %v", tc.labels, v, err, tc.want, tc.err)
		}
	}
}

// TestClientNoAgent: with nothing on the socket, the status is 0 and an
// error is returned, which the CLI takes as "use the spool".
func TestClientNoAgent(t *testing.T) {
	c := client.New(filepath.Join(t.TempDir(), "none.sock"))
	if _, status, err := c.Submit(context.Background(), []byte("{}")); status != 0 || err == nil {
		t.Errorf("Submit with no agent: %d %v, want 0 and an error", status, err)
	}
}

func TestJobPath(t *testing.T) {
	for _, tc := range []struct {
		id   string
		q    client.JobQuery
		want string
	}{
		{"j1", client.JobQuery{}, "/v1/jobs/j1"},
		{"a..b", client.JobQuery{Wait: 2 * time.Second}, "/v1/jobs/a..b?wait=2s"},
		{"j/1", client.JobQuery{Wait: 2 * time.Second, Guest: true}, "/v1/jobs/j%2F1?wait=2s&for=guest"},
	} {
		if got := client.JobPath(tc.id, tc.q); got != tc.want {
			t.Errorf("JobPath(%q, %+v) = %q, want %q", tc.id, tc.q, got, tc.want)
		}
	}
}
