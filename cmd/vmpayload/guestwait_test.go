package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// fakeAPI answers POST /v1/jobs and then GET /v1/jobs/{id} with the
// states given, one per request, repeating the last.
func fakeAPI(t *testing.T, states []result.Result) (socket string, forGuest *atomic.Int32) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "api.sock")
	ln := testenv.ListenUnix(t, socket)
	var n atomic.Int32
	forGuest = &atomic.Int32{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": "j1"})
	})
	mux.HandleFunc("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("for") == "guest" {
			forGuest.Add(1)
		}
		i := min(int(n.Add(1))-1, len(states)-1)
		_ = json.NewEncoder(w).Encode(states[i])
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return socket, forGuest
}

func TestSubmitWaitGuest(t *testing.T) {
	jobFile := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(jobFile, []byte(`{"version":1,"id":"j1","domain":"d1","hostname":"h"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pending := result.Result{ID: "j1", State: result.StateDone, Payload: &result.Payload{Image: payload.Image{InstanceID: "i1"}}, Guest: &result.Guest{Status: result.GuestPending}}
	guest := func(status string, mismatch bool) result.Result {
		r := pending
		r.Guest = &result.Guest{Status: status, InstanceID: "i1", InstanceIDMismatch: mismatch, Reports: 1}
		return r
	}
	for _, tc := range []struct {
		name   string
		states []result.Result
		code   int
		want   string // on stderr
	}{
		{"done", []result.Result{{ID: "j1", State: result.StateRunning}, pending, pending, guest(result.GuestDone, false)}, exitOK, "j1 done, guest done"},
		{"degraded", []result.Result{pending, guest(result.GuestDegraded, false)}, exitOK, "guest degraded"},
		{"error", []result.Result{pending, guest(result.GuestError, false)}, exitInvalid, "guest error"},
		{"timeout", []result.Result{guest(result.GuestTimeout, false)}, exitInvalid, "guest timeout"},
		{"mismatch", []result.Result{guest(result.GuestDone, true)}, exitInvalid, "instance-id mismatch"},
		{"no guest section", []result.Result{{ID: "j1", State: result.StateDone}}, exitOK, "j1 done"},
		{"job failed", []result.Result{{ID: "j1", State: result.StateFailed}}, exitInvalid, "j1 failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock, forGuest := fakeAPI(t, tc.states)
			var out, errb bytes.Buffer
			code := run([]string{"submit", "--socket", sock, "--wait=guest", "--timeout", "20s", jobFile}, &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d, want %d; stderr %q, want %q", code, tc.code, errb.String(), tc.want)
			}
			if forGuest.Load() == 0 {
				t.Errorf("the client never asked with for=guest")
			}
			last := tc.states[len(tc.states)-1]
			var got result.Result
			if err := json.Unmarshal(out.Bytes()[strings.Index(out.String(), "{"):], &got); err != nil || got.State != last.State {
				t.Errorf("printed result %q (%v)", out.String(), err)
			}
		})
	}
	// --wait alone still means the job only: each state once, a done job
	// without its guest's status; a bad value is a usage error
	sock, forGuest := fakeAPI(t, []result.Result{{ID: "j1", State: result.StateRunning}, {ID: "j1", State: result.StateRunning}, pending})
	var out, errb bytes.Buffer
	if code := run([]string{"submit", "--socket", sock, "--wait", jobFile}, &out, &errb); code != exitOK || forGuest.Load() != 0 ||
		errb.String() != "j1 running\nj1 done\n" {
		t.Errorf("--wait: exit %d, for=guest asked %d times; stderr %q", code, forGuest.Load(), errb.String())
	}
	errb.Reset()
	if code := run([]string{"submit", "--socket", sock, "--wait=soon", jobFile}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), `"soon"`) {
		t.Errorf("--wait=soon: exit %d stderr %q", code, errb.String())
	}
}

// TestAgentRefusalReachesTheUser: when the agent answers a job query with
// an error (400, 503, …), status and both --wait modes print the agent's
// own message, not a decoding error of its answer.
func TestAgentRefusalReachesTheUser(t *testing.T) {
	const msg = `"j1" is refused for this test`
	socket := filepath.Join(t.TempDir(), "api.sock")
	ln := testenv.ListenUnix(t, socket)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": "j1"})
	})
	mux.HandleFunc("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	jobFile := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(jobFile, []byte(`{"version":1,"id":"j1","domain":"d1","hostname":"h"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		run  func(out, errb *bytes.Buffer) int
	}{
		{"status", func(out, errb *bytes.Buffer) int {
			return run([]string{"status", "--socket", socket, "j1"}, out, errb)
		}},
		{"submit --wait", func(out, errb *bytes.Buffer) int {
			return run([]string{"submit", "--socket", socket, "--wait", "--timeout", "20s", jobFile}, out, errb)
		}},
		{"submit --wait=guest", func(out, errb *bytes.Buffer) int {
			return run([]string{"submit", "--socket", socket, "--wait=guest", "--timeout", "20s", jobFile}, out, errb)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := tc.run(&out, &errb)
			if code == exitOK || !strings.Contains(errb.String(), "400") || !strings.Contains(errb.String(), msg) || strings.Contains(errb.String(), "decoding") {
				t.Errorf("exit %d; stderr %q: want a failure quoting the agent's 400 and %q", code, errb.String(), msg)
			}
		})
	}
}
