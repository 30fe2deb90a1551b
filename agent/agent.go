// Package agent is vmpayload's host daemon: it takes jobs from the spool
// directory and the unix socket API, runs them on a worker pool (jobs for the
// same domain one after another, different domains in parallel), writes each
// outcome exactly once, follows domain lifecycle events to remove payloads of
// domains that are gone, and at start-up rebuilds the images that domain
// recipes describe (docs/durability.md) and collects orphaned images.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/vmpayload/vmpayload/agent/access"
	"github.com/vmpayload/vmpayload/agent/engine"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// Errors of Submit that the API maps to status codes.
var (
	ErrQueueFull    = errors.New("queue full")
	ErrDuplicate    = errors.New("a job with this id is already queued or running")
	ErrShuttingDown = errors.New("the agent is shutting down")
)

// Options configure an Agent.
type Options struct {
	Host           libvirtx.Host
	SpoolDir       string
	PayloadDir     string
	SecretsDir     string
	Workers        int
	QueueLimit     int
	RescanInterval time.Duration
	DefaultFormat  job.Format
	Bus            domxml.Bus
	ImageMode      os.FileMode
	ImageGID       int
	Log            *slog.Logger
	// Metrics records what the agent and its engine do; nil records
	// nothing.
	Metrics *metrics.Agent
	// Policy decides who may use privileged job fields (docs/security.md).
	Policy access.Policy
	// SpoolGroup is the gid whose members may drop jobs into the spool
	// (spool.OpenGroup); -1 or 0 with HasSpoolGroup false: root only.
	SpoolGroup    int
	HasSpoolGroup bool
	// PrebuiltDirs are where a job's prebuilt_image may come from
	// (engine.Engine.PrebuiltDirs).
	PrebuiltDirs []string
	// LibvirtTimeout bounds every libvirt call (libvirtx.Bounded); 0 means
	// unbounded.
	LibvirtTimeout time.Duration
	// GuestReport is the default of a job's guest_report; GuestTimeout
	// bounds the wait for a guest's first report after its domain started
	// (0: DefaultGuestTimeout). See docs/guest-report.md.
	GuestReport  bool
	GuestTimeout time.Duration
}

// task is a claimed job waiting for or in execution.
type task struct {
	claimed *spool.Claimed
	job     *job.Job // nil when the file did not parse
	report  job.Report
	base    result.Result
	key     string // serialisation key: the domain
	policy  access.Policy
}

// Agent is the daemon. Create it with New, then call Run.
type Agent struct {
	opt   Options
	log   *slog.Logger
	spool *spool.Spool
	eng   atomic.Pointer[engine.Engine]
	// starts records domain start times for every engine (see engine.Starts).
	starts engine.Starts
	// cleanups holds failed image removals for every engine (retried at
	// each rescan; /healthz is degraded while any is pending).
	cleanups engine.Cleanups
	// locks serialise the jobs of one domain, by UUID, for every engine.
	locks engine.DomainLocks
	met   *metrics.Agent

	reg    *registry
	events *hub
	// guest follows the guest report channels (guest.go).
	guest *guests

	mu      sync.Mutex
	pending map[string][]*task // per domain key, FIFO
	active  map[string]bool
	// ready holds the domain keys that have pending tasks and no worker,
	// in order; readyCond (on mu) wakes workers. A slice rather than a
	// channel sized by queue_limit, which cost 16 bytes per allowed job up
	// front (160 MB at the largest queue_limit).
	ready       []string
	readyCond   *sync.Cond
	readyClosed bool
	queued      int // tasks claimed and not finished
	// unclaimed counts jobs the API wrote into incoming/ that intake has
	// not claimed yet; Submit bounds queued+unclaimed by QueueLimit.
	unclaimed int
	inflight  atomic.Int64
	closing   bool

	scan chan struct{}
	wg   sync.WaitGroup

	viaSocket sync.Map // ids queued through the API → their result.Submitter

	// held names the spool files (in processing/) the agent has claimed and
	// not retired: queued, running, or with a result waiting to be written.
	// A file in processing/ that is not held is re-queued by sweep. Under mu.
	held map[string]bool
	// unwritten holds finished jobs whose result could not be written yet,
	// oldest first; retryResults writes them with backoff. Under mu.
	unwritten []*outcome
	// faults are the reasons /healthz reports "degraded", by area
	// ("results", "payload_dir", "spool"). Under mu.
	faults    map[string]string
	retryKick chan struct{}
}

// New prepares an agent: it creates the spool and payload directories.
func New(opt Options) (*Agent, error) {
	if opt.Host == nil {
		return nil, errors.New("agent: no libvirt host")
	}
	if opt.Workers <= 0 {
		opt.Workers = 4
	}
	if opt.QueueLimit <= 0 {
		opt.QueueLimit = 10000
	}
	if opt.RescanInterval <= 0 {
		opt.RescanInterval = 30 * time.Second
	}
	if opt.Bus == "" {
		opt.Bus = domxml.BusAuto
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	a := &Agent{opt: opt, log: opt.Log, met: opt.Metrics, reg: newRegistry(10000), events: newHub(),
		pending: map[string][]*task{}, active: map[string]bool{},
		scan: make(chan struct{}, 1), held: map[string]bool{}, faults: map[string]string{},
		retryKick: make(chan struct{}, 1)}
	a.readyCond = sync.NewCond(&a.mu)
	if opt.LibvirtTimeout > 0 {
		a.opt.Host = libvirtx.Bounded(opt.Host, opt.LibvirtTimeout, func(call string) {
			a.met.LibvirtTimeout(call)
			a.log.Warn("libvirt call timed out; the connection is reopened", "call", call, "libvirt_timeout", opt.LibvirtTimeout)
		})
		opt.Host = a.opt.Host
	}
	spoolGID := -1
	if opt.HasSpoolGroup {
		spoolGID = opt.SpoolGroup
		if os.Geteuid() == 0 && !readsOthersFiles() {
			return nil, errors.New("spool_group is set, but the agent lacks CAP_DAC_READ_SEARCH to read the jobs its members own (mode 0600); add it to the service's CapabilityBoundingSet (docs/security.md)")
		}
	}
	sp, err := spool.OpenGroup(opt.SpoolDir, spoolGID)
	if err != nil {
		return nil, err
	}
	a.spool = sp
	a.guest = newGuests(a)
	a.setEngine(opt)
	if _, err := a.eng.Load().EnsurePayloadDir(); err != nil {
		return nil, fmt.Errorf("preparing the agent: %w", err)
	}
	return a, nil
}

// readsOthersFiles reports whether the process may read files other users
// own with mode 0600: CAP_DAC_READ_SEARCH or CAP_DAC_OVERRIDE in its
// effective set.
func readsOthersFiles() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true // cannot tell; reading the jobs will say
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return true
			}
			const dacOverride, dacReadSearch = 1, 2 // capability numbers
			return caps&(1<<dacOverride|1<<dacReadSearch) != 0
		}
	}
	return true
}

func (a *Agent) setEngine(opt Options) {
	a.eng.Store(&engine.Engine{Host: opt.Host, PayloadDir: opt.PayloadDir, SecretsDir: opt.SecretsDir,
		DefaultFormat: opt.DefaultFormat, Bus: opt.Bus, ImageMode: opt.ImageMode, ImageGID: opt.ImageGID,
		Log: opt.Log, Metrics: a.met, Starts: &a.starts, Cleanups: &a.cleanups, Locks: &a.locks, PrebuiltDirs: opt.PrebuiltDirs,
		LibvirtTimeout: opt.LibvirtTimeout, GuestReport: opt.GuestReport})
}

// Reload applies the settings that can change without a restart: default
// format, payload drive bus, image mode and group, secrets directory,
// prebuilt directories and the logger. Others (URI, directories, workers,
// rescan interval, socket, admin group, libvirt timeout) need a restart.
func (a *Agent) Reload(opt Options) {
	cur := a.opt // keeps the (bounded) host of New
	cur.DefaultFormat, cur.Bus, cur.ImageMode, cur.ImageGID, cur.SecretsDir = opt.DefaultFormat, opt.Bus, opt.ImageMode, opt.ImageGID, opt.SecretsDir
	cur.PrebuiltDirs = opt.PrebuiltDirs
	cur.GuestReport = opt.GuestReport
	if opt.Log != nil {
		cur.Log = opt.Log
		a.log = opt.Log
	}
	a.setEngine(cur)
	a.log.Info("configuration reloaded")
}

// Spool returns the agent's spool.
func (a *Agent) Spool() *spool.Spool { return a.spool }

// Run starts the agent and blocks until ctx is cancelled; then it stops
// taking jobs, lets running jobs finish and returns. Claimed jobs that did
// not start stay in processing/ and run at the next start.
func (a *Agent) Run(ctx context.Context, ready func()) error {
	// Images of domains with a recipe first (a host reboot emptied the
	// payload directory), so that orphan collection sees them in place;
	// both work on one listing of the defined domains.
	if defs, err := a.eng.Load().ListDefined(ctx); err != nil {
		a.log.Warn("listing the defined domains at start-up failed; payload images neither rebuilt nor collected", "err", err)
	} else {
		if st, err := a.eng.Load().RebuildImages(ctx, defs); err != nil {
			a.log.Warn("rebuilding payload images failed", "err", err)
		} else if st != (engine.RebuildStats{}) {
			a.log.Info("payload images checked against their recipes", "rebuilt", st.Rebuilt, "intact", st.Intact, "failed", st.Failed)
		}
		if n, err := a.eng.Load().CollectOrphans(ctx, defs); err != nil {
			a.log.Warn("orphan collection failed", "err", err)
		} else if n > 0 {
			a.log.Info("removed orphaned payload images", "count", n)
		}
	}
	// Workers run jobs on a context that outlives ctx, so that a shutdown
	// lets running jobs finish. They start before recover, which may queue
	// more jobs than queue_limit (processing/ left by a run with a larger
	// one).
	workCtx, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	for i := 0; i < a.opt.Workers; i++ {
		a.wg.Add(1)
		go a.worker(workCtx)
	}
	lifeDone := make(chan struct{})
	go func() { defer close(lifeDone); a.lifecycle(workCtx) }()
	a.guest.start(workCtx)
	retryDone := make(chan struct{})
	go func() { defer close(retryDone); a.retryResults(workCtx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		a.mu.Lock()
		a.closing = true
		a.mu.Unlock()
		a.mu.Lock()
		a.readyClosed = true
		a.readyCond.Broadcast()
		a.mu.Unlock()
		a.wg.Wait()
		stopWork()
		a.guest.stop()
		<-lifeDone
		<-retryDone
		a.mu.Lock()
		if n := len(a.unwritten); n > 0 {
			a.log.Warn("stopping with job results not written; those jobs run again at the next start", "count", n)
		}
		a.mu.Unlock()
	}
	defer stop()

	if err := a.sweep(); err != nil {
		return err
	}
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching the spool: %w", err)
	}
	defer watcher.Close()
	if err := watcher.Add(a.spool.Dir(spool.Incoming)); err != nil {
		return fmt.Errorf("watching %s: %w", a.spool.Dir(spool.Incoming), err)
	}

	a.poke()
	if ready != nil {
		ready()
	}
	a.log.Info("agent running", "spool", a.opt.SpoolDir, "payload_dir", a.opt.PayloadDir, "workers", a.opt.Workers)
	ticker := time.NewTicker(a.opt.RescanInterval)
	defer ticker.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case ev, ok := <-watcher.Events:
			if !ok {
				break loop
			}
			if ev.Name == a.spool.Dir(spool.Incoming) && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) {
				// incoming/ itself went away, and its watch with it.
				a.heal(watcher)
			}
			if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Write) {
				a.intake()
			}
		case err, ok := <-watcher.Errors:
			if !ok {
				break loop
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				a.log.Warn("spool watch overflowed; rescanning")
			} else {
				a.log.Warn("spool watch error; rescanning", "err", err)
			}
			a.intake()
		case <-a.scan:
			a.intake()
		case <-ticker.C:
			a.heal(watcher)
			if err := a.sweep(); err != nil {
				a.log.Error("checking processing/ for jobs without a pending action", "err", err)
			}
			a.intake()
		}
	}

	a.log.Info("shutting down: finishing running jobs")
	stop()
	a.log.Info("agent stopped")
	return nil
}

// poke asks the intake loop for a rescan.
func (a *Agent) poke() {
	select {
	case a.scan <- struct{}{}:
	default:
	}
}

// sweep queues every job in processing/ that the agent does not hold: at
// start, the jobs a crash interrupted; later, any job a failed claim or an
// operator left there, so that no job sits in processing/ without a pending
// action. Jobs whose result was already written are only retired.
func (a *Agent) sweep() error {
	names, err := a.spool.Interrupted()
	if err != nil {
		return err
	}
	for _, name := range names {
		a.mu.Lock()
		held, closing := a.held[name], a.closing
		a.mu.Unlock()
		if held || closing {
			continue
		}
		c, err := a.spool.Reclaim(name)
		if err != nil {
			a.log.Warn("cannot reopen interrupted job", "file", name, "err", err)
			continue
		}
		t := a.prepare(c, result.SourceSpool)
		if res, done := a.spool.Finished(c, t.base.ID); done {
			if err := a.spool.Complete(c, res); err != nil {
				// Hold it with the results waiting to be written, so that
				// it is retried with backoff and /healthz says so.
				a.log.Error("retiring finished job failed; retrying", "id", t.base.ID, "err", err)
				a.mu.Lock()
				a.held[name] = true
				a.mu.Unlock()
				a.setFault(faultResults, err)
				a.hold(&outcome{t: t, res: res, retiring: true})
			}
			continue
		}
		a.log.Info("re-running interrupted job", "id", t.base.ID, "file", name)
		a.enqueue(t)
	}
	return nil
}

// intake claims waiting jobs from incoming/ while the queue has room, in
// one batch (one directory sync for all of them).
func (a *Agent) intake() {
	names, err := a.spool.Pending()
	if err != nil {
		a.log.Error("listing the spool", "err", err)
		return
	}
	a.mu.Lock()
	room, closing := a.opt.QueueLimit-a.queued, a.closing
	a.mu.Unlock()
	if closing || room <= 0 || len(names) == 0 {
		return
	}
	if len(names) > room {
		names = names[:room]
	}
	claimed, errs := a.spool.ClaimAll(names)
	for name, err := range errs {
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, spool.ErrExists) {
			a.log.Warn("claiming job failed", "file", name, "err", err)
		}
	}
	for _, c := range claimed {
		t := a.prepare(c, result.SourceSpool)
		if t.base.Source == result.SourceSpool {
			a.met.JobReceived(metrics.SourceSpool) // socket jobs were counted by Submit
		}
		a.enqueue(t)
	}
}

// socketSubmitter returns the API client that submitted job id when c is
// the very file the API wrote for it (spool.PutOwned: named ID.json and
// owned by the client, or by the agent when it cannot chown), and forgets
// it. Another file claiming the same id in its content (a spool writer's)
// gets its own owner as submitter, never the API client's identity.
func (a *Agent) socketSubmitter(c *spool.Claimed, id string) (result.Submitter, bool) {
	v, ok := a.viaSocket.Load(id)
	if !ok {
		return result.Submitter{}, false
	}
	who := v.(result.Submitter)
	if c.Name != id+".json" || (c.UID != who.UID && int(c.UID) != os.Geteuid()) {
		return result.Submitter{}, false
	}
	a.viaSocket.Delete(id)
	return who, true
}

// prepare parses a claimed file into a task.
func (a *Agent) prepare(c *spool.Claimed, source string) *task {
	t := &task{claimed: c, policy: a.opt.Policy}
	t.base = result.Result{ID: spool.IDFromName(c.Name), Source: source, State: result.StateQueued, ReceivedAt: time.Now().UTC()}
	if st, err := os.Lstat(c.Path); err == nil {
		t.base.ReceivedAt = st.ModTime().UTC()
	}
	if c.ReadErr == nil {
		opt := a.eng.Load().CheckOptions()
		j, rep := job.ParseWith(c.Data, opt.Defaults)
		if j != nil && j.ID != "" && rep.OK() {
			t.base.ID = j.ID
		}
		payload.CheckParsed(j, &rep, opt)
		t.job, t.report = j, rep
		if s, ok := a.socketSubmitter(c, t.base.ID); ok {
			t.base.Source = result.SourceSocket
			t.base.Submitter = &s
			a.mu.Lock()
			a.unclaimed = max(a.unclaimed-1, 0)
			a.mu.Unlock()
		}
		if j != nil {
			t.base.Domain, t.base.Action = j.Domain, string(j.Apply(opt.Defaults).Action)
		}
	}
	if t.base.Submitter == nil {
		s := access.FileOwner(c.UID, c.GID)
		t.base.Submitter = &s
	}
	t.key = queueKey(t.base.Domain)
	return t
}

// queueKey is the key that queues a job behind the jobs before it for the
// same domain field: the exact name (libvirt names are case-sensitive:
// "Web" and "web" are two domains), or the UUID in libvirt's form. A job
// naming a domain and one giving its UUID get two keys; the engine's
// DomainLocks serialise them by the UUID libvirt resolves both to.
func queueKey(domain string) string {
	if domxml.IsUUID(domain) {
		return "uuid:" + domxml.CanonicalUUID(domain)
	}
	return "name:" + domain
}

func (a *Agent) enqueue(t *task) {
	a.mu.Lock()
	a.held[t.claimed.Name] = true
	a.queued++
	q := a.queued
	a.reg.set(t.base)
	if a.active[t.key] {
		a.pending[t.key] = append(a.pending[t.key], t)
		a.mu.Unlock()
	} else {
		a.active[t.key] = true
		a.pending[t.key] = append(a.pending[t.key], t)
		a.ready = append(a.ready, t.key)
		a.readyCond.Signal()
		a.mu.Unlock()
	}
	a.met.QueueDepth(q)
	a.events.publish(Event{Kind: "job", Type: "received", ID: t.base.ID, Domain: t.base.Domain, Submitter: t.base.Submitter})
}

// worker runs the tasks of one domain key at a time.
func (a *Agent) worker(ctx context.Context) {
	defer a.wg.Done()
	for {
		a.mu.Lock()
		for len(a.ready) == 0 && !a.readyClosed {
			a.readyCond.Wait()
		}
		if len(a.ready) == 0 {
			a.mu.Unlock()
			return
		}
		key := a.ready[0]
		a.ready = a.ready[1:]
		a.mu.Unlock()
		for {
			a.mu.Lock()
			if a.closing || len(a.pending[key]) == 0 {
				if len(a.pending[key]) == 0 {
					delete(a.pending, key)
				}
				delete(a.active, key)
				a.mu.Unlock()
				break
			}
			t := a.pending[key][0]
			a.pending[key] = a.pending[key][1:]
			a.mu.Unlock()
			a.execute(ctx, t)
		}
	}
}

// forbidden returns the privileged fields of t's job its submitter may not
// use (agent/access); the job then fails before libvirt is asked anything.
func (t *task) forbidden() []job.FieldError {
	if t.job == nil || t.base.Submitter == nil {
		return nil
	}
	return t.policy.Check(t.job, *t.base.Submitter)
}

func (a *Agent) execute(ctx context.Context, t *task) {
	a.met.InFlight(int(a.inflight.Add(1)))
	defer func() { a.met.InFlight(int(a.inflight.Add(-1))) }()
	running := t.base
	running.State = result.StateRunning
	a.reg.set(running)
	a.events.publish(Event{Kind: "job", Type: "running", ID: t.base.ID, Domain: t.base.Domain, Submitter: t.base.Submitter})

	var res result.Result
	var forbidden []job.FieldError
	if t.claimed.ReadErr == nil && t.report.OK() {
		forbidden = t.forbidden()
	}
	switch {
	case t.claimed.ReadErr != nil:
		res = t.base
		res.Fail(result.CodeBadFile, t.claimed.ReadErr.Error(), "")
	case !t.report.OK():
		res = t.base
		res.Fail(result.CodeInvalidJob, (&t.report).Err().Error(), t.report.Errors[0].Field)
		res.Errors = t.report.Errors
	case t.claimed.ReadErr == nil && a.spool.ForeignID(t.claimed, t.base.ID):
		res = t.base
		res.Fail(result.CodeForbidden, fmt.Sprintf("job id %q already has a result of another submitter; choose another id (this result is %s)",
			t.base.ID, a.spool.ForeignResultPath(t.base.ID, t.claimed.UID)), "id")
	case forbidden != nil:
		res = t.base
		res.Fail(result.CodeForbidden, forbidden[0].Message, forbidden[0].Field)
		res.Errors = forbidden
	default:
		var err error
		res, err = a.eng.Load().Run(ctx, t.job, t.base)
		if err != nil {
			// shut down while libvirt was unreachable: leave the job in
			// processing/ for the next start
			a.log.Warn("job interrupted; it runs again at the next start", "id", t.base.ID, "err", err)
			a.finishCount()
			return
		}
	}
	res.Finish(time.Now())
	if g := res.Guest; g != nil && res.State == result.StateDone && g.Status == result.GuestPending && g.StartedAt == nil {
		// guest_timeout counts from here (the domain was started, or its
		// payload changed, by this job). Set before the result is first
		// written, so that following the guest does not rewrite it at once.
		t := *res.FinishedAt
		g.StartedAt = &t
	}
	if res.Errors == nil {
		res.Errors = []job.FieldError{}
	}
	a.complete(t, res)
	a.finishCount()
}

// report publishes a job's outcome once its result is written: registry,
// metrics, event and log.
func (a *Agent) report(res result.Result) {
	a.reg.set(res)
	a.met.JobFinished(res.State, time.Duration(res.DurationMS)*time.Millisecond)
	ev := Event{Kind: "job", Type: string(res.State), ID: res.ID, Domain: res.Domain, UUID: res.DomainUUID, Submitter: res.Submitter}
	attrs := []any{"id", res.ID, "domain", res.Domain, "action", res.Action, "state", res.State, "duration_ms", res.DurationMS}
	if s := res.Submitter; s != nil {
		attrs = append(attrs, "source", res.Source, "uid", s.UID, "user", s.User, "gid", s.GID, "pid", s.PID)
	}
	if res.Error != nil {
		ev.Error = res.Error.Code
		attrs = append(attrs, "code", res.Error.Code, "field", res.Error.Field, "error", res.Error.Message)
		a.log.Warn("job failed", attrs...)
	} else {
		if res.Payload != nil {
			attrs = append(attrs, "image", res.Payload.Path, "reused", res.Payload.Reused)
		}
		a.log.Info("job done", attrs...)
	}
	a.events.publish(ev)
	a.guest.finished(res)
}

func (a *Agent) finishCount() {
	a.mu.Lock()
	a.queued--
	q := a.queued
	a.mu.Unlock()
	a.met.QueueDepth(q)
	a.poke() // room for more
}

// lifecycle follows libvirt events until ctx ends.
func (a *Agent) lifecycle(ctx context.Context) {
	evs := a.opt.Host.Events()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-evs:
			if !ok {
				return
			}
			kind := "domain"
			if ev.Type == libvirtx.EventDisconnected || ev.Type == libvirtx.EventReconnected {
				kind = "libvirt"
				a.log.Info("libvirt connection "+ev.Type.String(), "reconnects", a.opt.Host.Reconnects())
			}
			if ev.Type == libvirtx.EventStarted {
				a.starts.Note(ev.UUID, time.Now())
			}
			if ev.Type == libvirtx.EventUndefined {
				a.starts.Forget(ev.UUID)
				a.eng.Load().RemoveDomainImages(ev.UUID)
				a.guest.gone(ev.UUID)
			}
			a.events.publish(Event{Kind: kind, Type: ev.Type.String(), Domain: ev.Name, UUID: ev.UUID})
			if ev.Type == libvirtx.EventStarted {
				a.guest.started(ev.UUID)
			}
		}
	}
}

// Submit is SubmitAs on behalf of the agent's own user.
func (a *Agent) Submit(data []byte) (string, error) {
	return a.SubmitAs(data, access.FileOwner(uint32(os.Geteuid()), uint32(os.Getegid())))
}

// SubmitAs checks a job posted to the API by who (payload.Check, with the
// engine's CheckOptions: every problem at once) and queues it through
// the spool, so that it survives a crash like any dropped file. It returns
// the job id; a *job.ValidationError for an invalid job, an
// *access.ForbiddenError when who may not use a field of it.
func (a *Agent) SubmitAs(data []byte, who result.Submitter) (string, error) {
	opt := a.eng.Load().CheckOptions()
	j, _, rep := payload.Check(data, opt)
	if err := rep.Err(); err != nil {
		return "", err
	}
	if errs := a.opt.Policy.Check(j, who); errs != nil {
		a.log.Warn("job refused", "domain", j.Domain, "field", errs[0].Field, "uid", who.UID, "user", who.User, "gid", who.GID, "pid", who.PID)
		return "", &access.ForbiddenError{Errors: errs}
	}
	id := j.ID
	if id == "" {
		id = newID()
	}
	if cur, ok := a.reg.get(id); ok && !cur.State.Final() {
		return "", fmt.Errorf("job id %q: %w", id, ErrDuplicate)
	}
	// Reserve a place: jobs queued or running plus jobs this API wrote
	// that intake has not claimed yet stay within queue_limit.
	a.mu.Lock()
	if a.closing {
		a.mu.Unlock()
		return "", ErrShuttingDown
	}
	if n := a.queued + a.unclaimed; n >= a.opt.QueueLimit {
		a.mu.Unlock()
		return "", fmt.Errorf("%w: %d jobs are queued or running (queue_limit %d); retry later", ErrQueueFull, n, a.opt.QueueLimit)
	}
	a.unclaimed++
	a.mu.Unlock()
	a.viaSocket.Store(id, who)
	a.reg.set(result.Result{ID: id, Domain: j.Domain, Action: string(j.Apply(opt.Defaults).Action), State: result.StateQueued, Source: result.SourceSocket, Submitter: &who, ReceivedAt: time.Now().UTC()})
	if err := a.spool.PutOwned(id, data, int(who.UID)); err != nil {
		if _, mine := a.viaSocket.LoadAndDelete(id); mine {
			a.mu.Lock()
			a.unclaimed = max(a.unclaimed-1, 0)
			a.mu.Unlock()
		}
		a.reg.forget(id)
		if errors.Is(err, spool.ErrExists) {
			return "", fmt.Errorf("job id %q: %w", id, ErrDuplicate)
		}
		return "", fmt.Errorf("writing job %q into the spool: %w", id, err)
	}
	a.met.JobReceived(metrics.SourceSocket)
	a.poke()
	return id, nil
}

func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "job-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

// Job returns the current state of a job: from memory for jobs of this run,
// else from the spool's result files.
func (a *Agent) Job(id string) (result.Result, bool) {
	if r, ok := a.reg.get(id); ok {
		return r, true
	}
	return a.spool.Lookup(id)
}

// Wait blocks until job id is final or ctx ends.
func (a *Agent) Wait(ctx context.Context, id string) (result.Result, bool) {
	if r, ok := a.reg.wait(ctx, id); ok {
		return r, true
	}
	return a.spool.Lookup(id)
}

// Jobs lists up to n jobs of this run, newest first.
func (a *Agent) Jobs(n int) []result.Result { return a.reg.list(n) }

// Subscribe streams events until cancel is called.
func (a *Agent) Subscribe() (<-chan Event, func()) { return a.events.subscribe() }

// Health reports the agent's state for /healthz.
func (a *Agent) Health() map[string]any {
	a.mu.Lock()
	q := a.queued
	a.mu.Unlock()
	conn := "connected"
	if c, ok := a.opt.Host.(interface{ Connected() bool }); ok && !c.Connected() {
		conn = "disconnected"
	}
	h := map[string]any{"status": "ok", "libvirt": conn, "queued": q, "in_flight": a.inflight.Load(), "libvirt_reconnects": a.opt.Host.Reconnects()}
	a.mu.Lock()
	h["results_pending"] = len(a.unwritten)
	var reasons []string
	for _, area := range faultAreas {
		r, ok := a.faults[area]
		switch {
		case area == faultResults && len(a.unwritten) > 0:
			msg := fmt.Sprintf("job results not written yet (retrying with backoff; %d waiting)", len(a.unwritten))
			if ok {
				msg += ": " + r // the last write error
			}
			reasons = append(reasons, msg)
		case area == faultResults:
			// all written since; the retrier clears the fault
		case ok:
			reasons = append(reasons, r)
		}
	}
	if len(reasons) > 0 {
		h["status"], h["reasons"] = "degraded", reasons
	}
	a.mu.Unlock()
	return h
}
