// Package api serves the agent's HTTP/1.1 + JSON API on a unix socket:
//
//	POST /v1/jobs            submit a job; 202 {"id"}; 400 {"errors":[...]} when invalid;
//	                         403 {"errors":[...]} when the client may not use a field
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
	"sync"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/access"
	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/job"
)

// Backend is what the API needs from the agent.
type Backend interface {
	// SubmitAs queues a job on behalf of who (the client's SO_PEERCRED
	// credentials); it returns an *access.ForbiddenError when who may not
	// use a field of the job.
	SubmitAs(data []byte, who result.Submitter) (string, error)
	Job(id string) (result.Result, bool)
	Wait(ctx context.Context, id string) (result.Result, bool)
	Jobs(n int) []result.Result
	Subscribe() (<-chan agent.Event, func())
	Health() map[string]any
}

// GuestWaiter is a Backend that can wait for a job's guest report
// (GET /v1/jobs/{id}?wait=D&for=guest).
type GuestWaiter interface {
	WaitGuest(ctx context.Context, id string) (result.Result, bool)
}

// MaxWait bounds ?wait=.
const MaxWait = 10 * time.Minute

// Limits of the server that bound what a flood of clients (or slow ones)
// can hold: memory, goroutines, connections.
const (
	// DefaultMaxSubmits is how many POST /v1/jobs are read and validated at
	// once; each holds at most job.MaxJobBytes of body.
	DefaultMaxSubmits = 32
	// SubmitSlotWait is how long a POST waits for one of those slots
	// before it is answered 503.
	SubmitSlotWait = 5 * time.Second
	// BodyTimeout bounds reading a request body (slow clients).
	BodyTimeout = 30 * time.Second
	// WriteTimeout bounds writing one answer, or one event of
	// /v1/events, to a client that does not read.
	WriteTimeout = 30 * time.Second
	// IdleTimeout closes keep-alive connections with no request.
	IdleTimeout = 2 * time.Minute
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout = 10 * time.Second
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 64 << 10
)

// ErrTooManySubmits is answered 503 when every submission slot stays busy
// for SubmitSlotWait.
var ErrTooManySubmits = errors.New("too many job submissions in progress; retry later")

// Server is the API server.
type Server struct {
	Backend Backend
	// Metrics is served at /metrics; nil serves an empty page.
	Metrics *metrics.Agent
	Log     *slog.Logger
	// MaxSubmits bounds concurrent POST /v1/jobs (DefaultMaxSubmits when 0).
	MaxSubmits int
	// SubmitBudget bounds the estimated memory of the POST /v1/jobs in
	// progress at once (DefaultSubmitBudget when 0; see admit.go).
	SubmitBudget int64
	// RootSubmits is how many more POSTs than MaxSubmits root may have in
	// progress, and RootReserve the part of SubmitBudget only root may use
	// (4 and RootSubmitReserve when 0; negative for none).
	RootSubmits int
	RootReserve int64
	// SlotWait and BodyTimeout override SubmitSlotWait and BodyTimeout
	// when not 0.
	SlotWait, BodyTimeout time.Duration
	// MaxConnections caps the connections open at once, of which
	// MaxConnectionsPerUID are kept for root and the agent's own uid;
	// MaxConnectionsPerUID caps each other uid's (SO_PEERCRED). 0: the
	// defaults (DefaultMaxConnections, DefaultMaxConnectionsPerUID).
	MaxConnections, MaxConnectionsPerUID int
	// MaxEventSubscribers and MaxEventSubscribersPerUID cap GET /v1/events
	// streams the same way (0: the defaults).
	MaxEventSubscribers, MaxEventSubscribersPerUID int
	// FDReserve is how many file descriptors MaxConnections leaves free
	// below the open-file limit (DefaultFDReserve when 0); see
	// FDReserveFor.
	FDReserve int

	initOnce   sync.Once
	bodies     *admission // reading bodies: weighed by their length
	admit      *admission // checking jobs: weighed by estimated memory
	srv        *http.Server
	conns      *limiter // connections
	subs       *limiter // /v1/events subscriptions
	refusedMu  sync.Mutex
	refusedLog map[string]time.Time
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		n := s.MaxSubmits
		if n <= 0 {
			n = DefaultMaxSubmits
		}
		budget, reserve, rootN := s.SubmitBudget, s.RootReserve, s.RootSubmits
		if budget <= 0 {
			budget = DefaultSubmitBudget
		}
		if reserve == 0 {
			reserve = RootSubmitReserve
		}
		if rootN == 0 {
			rootN = 4
		}
		rootN = max(rootN, 0) // negative: none
		s.admit = newAdmission(budget, min(max(reserve, 0), budget), n, rootN)
		bodyReserve := int64(job.MaxJobBytes)
		if s.RootReserve < 0 {
			bodyReserve = 0
		}
		s.bodies = newAdmission(BodyBudget(n), bodyReserve, n, rootN)
		if s.SlotWait <= 0 {
			s.SlotWait = SubmitSlotWait
		}
		if s.BodyTimeout <= 0 {
			s.BodyTimeout = BodyTimeout
		}
		s.initLimits()
		// No server-wide ReadTimeout/WriteTimeout: ?wait= and /v1/events
		// hold a request for minutes, and a read deadline expiring under a
		// handler cancels its context. Bodies and answers get per-request
		// deadlines instead (BodyTimeout, WriteTimeout).
		s.srv = &http.Server{Handler: s.routes(), ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: MaxHeaderBytes,
			ConnContext: withPeer}
	})
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", s.submit)
	mux.HandleFunc("GET /v1/jobs", s.list)
	mux.HandleFunc("GET /v1/jobs/{id}", s.get)
	mux.HandleFunc("GET /v1/events", s.stream)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Backend.Health())
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", metrics.ContentType)
		_, _ = s.Metrics.WriteTo(w) // a failed write is the client's loss
	})
	return withDeadlines(mux)
}

// withDeadlines gives every request a write deadline (a keep-alive
// connection keeps the previous request's otherwise); handlers that answer
// later (?wait=, /v1/events) move it when they write.
func withDeadlines(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(WriteTimeout))
		h.ServeHTTP(w, r)
	})
}

type peerKey struct{}

// peerInfo is the client identity of a connection, read once when it is
// accepted.
type peerInfo struct {
	who result.Submitter
	err error
}

// withPeer records the connection's SO_PEERCRED credentials in its context.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	if w, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = w.NetConn() // a limitedConn
	}
	who, err := access.PeerCred(c)
	return context.WithValue(ctx, peerKey{}, peerInfo{who, err})
}

// peer returns the credentials of r's client.
func peer(r *http.Request) (result.Submitter, error) {
	p, ok := r.Context().Value(peerKey{}).(peerInfo)
	if !ok {
		return result.Submitter{}, errors.New("reading peer credentials: the connection did not record them")
	}
	return p.who, p.err
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

// Serve serves on l until Shutdown, within the connection caps.
func (s *Server) Serve(l net.Listener) error {
	s.init()
	err := s.srv.Serve(&limitListener{Listener: l, s: s})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server, waiting for requests in progress up to ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	return s.srv.Shutdown(ctx)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(WriteTimeout))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func tooLarge(w http.ResponseWriter) {
	writeJSON(w, http.StatusRequestEntityTooLarge, client.Answer{Error: fmt.Sprintf("job document larger than %d bytes", job.MaxJobBytes),
		Errors: []job.FieldError{{Code: job.CodeTooLarge, Message: fmt.Sprintf("job document is larger than %d bytes", job.MaxJobBytes)}}})
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > job.MaxJobBytes {
		w.Header().Set("Connection", "close")
		tooLarge(w) // without reading a byte of it
		return
	}
	who, err := peer(r)
	if err != nil {
		// Fail closed: a job without a known submitter is not taken.
		s.log().Error("refusing job: unknown client", "err", err)
		writeJSON(w, http.StatusInternalServerError, client.Answer{Error: err.Error()})
		return
	}
	// Bodies are read, then checked, within budgets weighed by size
	// (admit.go): a flood of clients costs goroutines waiting here, not
	// memory, and root's POST has a reserve no tenant can take.
	s.init()
	release, ok := s.bodies.acquire(r.Context(), who.UID, bodyWeight(r.ContentLength), s.SlotWait)
	if !ok {
		s.busy(w, r)
		return
	}
	defer release()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, job.MaxJobBytes))
	if err != nil {
		// Close the connection after the answer: the server would
		// otherwise try to read what is left of the body first (a
		// stalled client would hold it forever).
		w.Header().Set("Connection", "close")
		_ = r.Body.Close()
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			tooLarge(w)
			return
		}
		writeJSON(w, http.StatusBadRequest, client.Answer{Error: "reading the request body: " + err.Error()})
		return
	}
	_ = rc.SetReadDeadline(time.Time{})
	// Checking the job is what costs memory; the body is here, so it is
	// weighed exactly, and held only while it is checked.
	releaseCheck, ok := s.admit.acquire(r.Context(), who.UID, submitCost(int64(len(body))), s.SlotWait)
	if !ok {
		s.busy(w, r)
		return
	}
	defer releaseCheck()
	id, err := s.Backend.SubmitAs(body, who)
	var ve *job.ValidationError
	var fe *access.ForbiddenError
	switch {
	case err == nil:
		w.Header().Set("Location", "/v1/jobs/"+id)
		writeJSON(w, http.StatusAccepted, client.Answer{ID: id, State: result.StateQueued})
	case errors.As(err, &ve):
		writeJSON(w, http.StatusBadRequest, client.Answer{Error: "invalid job", Errors: ve.Errors})
	case errors.As(err, &fe):
		writeJSON(w, http.StatusForbidden, client.Answer{Error: "forbidden", Errors: fe.Errors})
	case errors.Is(err, agent.ErrQueueFull), errors.Is(err, agent.ErrShuttingDown):
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, client.Answer{Error: err.Error()})
	case errors.Is(err, agent.ErrDuplicate), errors.Is(err, agent.ErrIDTaken):
		ans := client.Answer{Error: err.Error()}
		var ie *agent.IDError
		if errors.As(err, &ie) {
			ans.Errors = ie.Errors // the field: id
		}
		writeJSON(w, http.StatusConflict, ans)
	default:
		s.log().Error("queueing job", "err", err)
		writeJSON(w, http.StatusInternalServerError, client.Answer{Error: "queueing the job failed: " + err.Error()})
	}
}

// busy answers 503 "too many job submissions" (nothing to a client that
// is gone).
func (s *Server) busy(w http.ResponseWriter, r *http.Request) {
	if r.Context().Err() != nil {
		return
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, client.Answer{Error: ErrTooManySubmits.Error()})
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
	if !job.ValidID(id) {
		writeJSON(w, http.StatusBadRequest, client.Answer{Error: fmt.Sprintf("%q is not a job id", id)})
		return
	}
	res, ok := result.Result{}, false
	if ws := r.URL.Query().Get("wait"); ws != "" {
		d, err := time.ParseDuration(ws)
		if err != nil || d < 0 {
			writeJSON(w, http.StatusBadRequest, client.Answer{Error: fmt.Sprintf("wait=%q is not a duration such as 30s", ws)})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), min(d, MaxWait))
		defer cancel()
		wait := s.Backend.Wait
		switch f := r.URL.Query().Get("for"); f {
		case "", "job":
		case "guest":
			// until the guest section is final too (docs/guest-report.md)
			if gw, ok := s.Backend.(GuestWaiter); ok {
				wait = gw.WaitGuest
			}
		default:
			writeJSON(w, http.StatusBadRequest, client.Answer{Error: fmt.Sprintf("for=%q: want job or guest", f)})
			return
		}
		res, ok = wait(ctx, id)
	} else {
		res, ok = s.Backend.Job(id)
	}
	if !ok {
		writeJSON(w, http.StatusNotFound, client.Answer{Error: fmt.Sprintf("no job %q", id)})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, client.Answer{Error: "streaming unsupported"})
		return
	}
	// Each subscriber costs the agent a goroutine and an event buffer,
	// and every event is copied to each: capped per uid and in all.
	s.init()
	who, err := peer(r)
	uid := who.UID
	if err != nil {
		uid = unknownUID
	}
	if reason := s.subs.acquire(uid); reason != "" {
		s.Metrics.ConnectionRefused(refusedAs(reason, metrics.RefusedSubscribersPerUID, metrics.RefusedSubscribersTotal))
		s.warnRefused(uid, reason, "event subscription")
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, client.Answer{Error: s.refusal("event subscribers", uid, reason, s.subs)})
		return
	}
	defer s.subs.release(uid)
	ch, cancel := s.Backend.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	enc := json.NewEncoder(w)
	rc := http.NewResponseController(w)
	// Between events the connection has no write deadline; each event
	// sets one.
	_ = rc.SetWriteDeadline(time.Time{})
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-ch:
			// A client that stops reading is dropped after WriteTimeout.
			_ = rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
			if err := enc.Encode(ev); err != nil {
				return
			}
			fl.Flush()
		}
	}
}
