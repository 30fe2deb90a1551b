// Package api serves the agent's HTTP/1.1 + JSON API on a unix socket:
//
//	POST /v1/jobs            submit a job; 202 {"id"}; 400 {"errors":[...]} when invalid
//	GET  /v1/jobs            recent jobs of this run
//	GET  /v1/jobs/{id}       a job's state/result; ?wait=30s blocks until it is final
//	GET  /v1/events          JSON lines: job and domain events as they happen
//	GET  /healthz            liveness and libvirt connection state
//	GET  /metrics            Prometheus text format
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/job"
)

// Backend is what the API needs from the agent.
type Backend interface {
	Submit(data []byte) (string, error)
	Job(id string) (result.Result, bool)
	Wait(ctx context.Context, id string) (result.Result, bool)
	Jobs(n int) []result.Result
	Subscribe() (<-chan agent.Event, func())
	Health() map[string]any
}

// MaxWait bounds ?wait=.
const MaxWait = 10 * time.Minute

// Server is the API server.
type Server struct {
	Backend Backend
	// Metrics writes the Prometheus exposition; nil serves an empty page.
	Metrics func(w io.Writer)
	Log     *slog.Logger
	srv     *http.Server
}

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", s.submit)
	mux.HandleFunc("GET /v1/jobs", s.list)
	mux.HandleFunc("GET /v1/jobs/{id}", s.get)
	mux.HandleFunc("GET /v1/events", s.stream)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Backend.Health())
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if s.Metrics != nil {
			s.Metrics(w)
		}
	})
	return mux
}

// Listen creates the unix socket (mode 0660, group gid unless -1),
// replacing a stale one, and returns its listener.
func Listen(path string, gid int) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating socket directory: %w", err)
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s is in use by another agent", path)
		}
		os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, fmt.Errorf("setting mode of %s: %w", path, err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return nil, fmt.Errorf("setting group of %s: %w", path, err)
		}
	}
	return l, nil
}

// Serve serves on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	err := s.srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server, waiting for requests in progress up to ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Shutdown(ctx)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

type apiError struct {
	Error  string           `json:"error"`
	Errors []job.FieldError `json:"errors,omitempty"`
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, job.MaxJobBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeJSON(w, http.StatusRequestEntityTooLarge, apiError{Error: fmt.Sprintf("job document larger than %d bytes", job.MaxJobBytes),
				Errors: []job.FieldError{{Code: job.CodeTooLarge, Message: fmt.Sprintf("job document is larger than %d bytes", job.MaxJobBytes)}}})
			return
		}
		writeJSON(w, http.StatusBadRequest, apiError{Error: "reading the request body: " + err.Error()})
		return
	}
	id, err := s.Backend.Submit(body)
	var ve *job.ValidationError
	switch {
	case err == nil:
		w.Header().Set("Location", "/v1/jobs/"+id)
		writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "state": string(result.StateQueued)})
	case errors.As(err, &ve):
		writeJSON(w, http.StatusBadRequest, apiError{Error: "invalid job", Errors: ve.Errors})
	case errors.Is(err, agent.ErrQueueFull), errors.Is(err, agent.ErrShuttingDown):
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
	case errors.Is(err, agent.ErrDuplicate):
		writeJSON(w, http.StatusConflict, apiError{Error: err.Error()})
	default:
		s.log().Error("queueing job", "err", err)
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "queueing the job failed: " + err.Error()})
	}
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"jobs": s.Backend.Jobs(100)})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !job.ValidSecretName(id) { // same alphabet as ids; refuses "..", "/"
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("%q is not a job id", id)})
		return
	}
	if ws := r.URL.Query().Get("wait"); ws != "" {
		d, err := time.ParseDuration(ws)
		if err != nil || d < 0 {
			writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("wait=%q is not a duration such as 30s", ws)})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), min(d, MaxWait))
		defer cancel()
		res, ok := s.Backend.Wait(ctx, id)
		if !ok {
			writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no job %q", id)})
			return
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	res, ok := s.Backend.Job(id)
	if !ok {
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no job %q", id)})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "streaming unsupported"})
		return
	}
	ch, cancel := s.Backend.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-ch:
			if err := enc.Encode(ev); err != nil {
				return
			}
			fl.Flush()
		}
	}
}
