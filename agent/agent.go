// Package agent is vmpayload's host daemon: it takes jobs from the spool
// directory and the unix socket API, runs them on a worker pool (jobs for the
// same domain one after another, different domains in parallel), writes each
// outcome exactly once, follows domain lifecycle events to remove payloads of
// domains that are gone, and at start-up rebuilds the images that domain
// recipes describe (docs/durability.md) and collects orphaned images.
package agent

import (
	"context"
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
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
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
	// HostID is this host's id for payload image owner markers
	// (owner.HostID; engine.Engine.HostID); "" records none.
	HostID string
	// ResultRetention bounds what done/, failed/ and rejected/ keep
	// (spool.Prune, at start-up and every pruneEveryRescans rescans); zero
	// keeps all.
	ResultRetention spool.Retention
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
	// viaSocket holds the jobs the API is writing or wrote into incoming/
	// and intake has not claimed yet, by id (under mu); Submit bounds
	// queued+len(viaSocket) by QueueLimit. Each intake scan reconciles it
	// with what incoming/ really holds (reconcileAPIJobs), so a file its
	// owner renamed or removed frees its place.
	viaSocket map[string]*apiJob
	// putSeq counts the API's completed writes into incoming/ (under mu).
	putSeq   uint64
	inflight atomic.Int64
	closing  bool

	scan chan struct{}
	wg   sync.WaitGroup

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
	// leftByMigration holds the domains that migrated away while their
	// definition was still listed here (UUID → name): libvirt removes the
	// definition of an --undefinesource migration just after its stopped
	// event, so the next rescan looks again (recheckMigrated). Under mu.
	leftByMigration map[string]string
	// retention is Options.ResultRetention, as Reload last set it.
	retention atomic.Pointer[spool.Retention]
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
	if opt.GuestTimeout <= 0 {
		opt.GuestTimeout = DefaultGuestTimeout
	}
	a := &Agent{opt: opt, log: opt.Log, met: opt.Metrics, reg: newRegistry(10000), events: newHub(),
		pending: map[string][]*task{}, active: map[string]bool{},
		scan: make(chan struct{}, 1), held: map[string]bool{}, faults: map[string]string{},
		retryKick: make(chan struct{}, 1), leftByMigration: map[string]string{}, viaSocket: map[string]*apiJob{}}
	a.readyCond = sync.NewCond(&a.mu)
	a.retention.Store(&opt.ResultRetention)
	a.met.SetLibvirtConnected(a.libvirtConnected)
	a.met.SetDegraded(a.degradedAreas)
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
		LibvirtTimeout: opt.LibvirtTimeout, GuestReport: opt.GuestReport, HostID: opt.HostID})
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
	r := opt.ResultRetention
	a.retention.Store(&r)
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
	// After sweep: the interrupted jobs it found are queued (and kept)
	// and those whose result was written are retired.
	a.prune()
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
	ticks := 0
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
			a.recheckMigrated(ctx)
			if err := a.sweep(); err != nil {
				a.log.Error("checking processing/ for jobs without a pending action", "err", err)
			}
			if ticks++; ticks%pruneEveryRescans == 0 {
				a.prune()
			}
			a.intake()
		}
	}

	a.log.Info("shutting down: finishing running jobs")
	stop()
	a.log.Info("agent stopped")
	return nil
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
			// A rename undefines the old name and defines the new one
			// with the same UUID: the domain, its payload and its
			// pending guest report live on.
			if (ev.Type == libvirtx.EventStopped && !ev.Saved) || (ev.Type == libvirtx.EventUndefined && !ev.Renamed) {
				// files the domain's QEMU was started with that no definition
				// names any more (a fw_cfg config replaced while it ran); not
				// for a save, whose state file resumes with those files
				a.eng.Load().DomainStopped(ev.UUID)
			}
			if ev.Type == libvirtx.EventUndefined && !ev.Renamed {
				a.starts.Forget(ev.UUID)
				a.eng.Load().RemoveDomainImages(ev.UUID)
				a.guest.gone(ev.UUID)
			}
			if ev.Type == libvirtx.EventStopped && ev.Detail == libvirtx.StoppedMigrated {
				a.migratedAway(ctx, ev)
			}
			a.events.publish(Event{Kind: kind, Type: ev.Type.String(), Domain: ev.Name, UUID: ev.UUID})
			if ev.Type == libvirtx.EventStarted {
				a.guest.started(ev.UUID)
			}
		}
	}
}

// migratedAway handles a domain that left this host by live migration. With
// --undefinesource libvirt removes its definition without an undefined
// event: its images here are then removed like an undefined domain's, those
// this host owns only (a shared payload directory: the destination's hook
// claimed the image the domain runs with there). libvirt removes the
// definition just after the event, so a definition still listed is looked
// at again at the next rescan; one that stays (no --undefinesource) keeps
// its images until it is undefined.
func (a *Agent) migratedAway(ctx context.Context, ev libvirtx.Event) {
	if a.goneAfterMigration(ctx, ev.UUID, ev.Name) {
		return
	}
	a.mu.Lock()
	a.leftByMigration[ev.UUID] = ev.Name
	a.mu.Unlock()
}

// recheckMigrated looks once more at the domains migratedAway found still
// defined, and forgets them.
func (a *Agent) recheckMigrated(ctx context.Context) {
	a.mu.Lock()
	left := a.leftByMigration
	a.leftByMigration = map[string]string{}
	a.mu.Unlock()
	for uuid, name := range left {
		if !a.goneAfterMigration(ctx, uuid, name) {
			a.log.Info("domain migrated away; its definition stays here, and so do its payload images", "domain", name, "uuid", uuid)
		}
	}
}

// goneAfterMigration removes the images this host owns of a domain that
// migrated away when its definition is gone, and reports whether it was
// (or whether its state is unknown: the next start-up's orphan collection
// decides then).
func (a *Agent) goneAfterMigration(ctx context.Context, uuid, name string) bool {
	d, err := a.opt.Host.Domain(ctx, uuid)
	switch {
	case libvirtx.IsNotFound(err):
		a.log.Info("domain migrated away and undefined here; removing the payload images this host owns", "domain", name, "uuid", uuid)
		a.starts.Forget(uuid)
		a.eng.Load().RemoveDomainImages(uuid)
		return true
	case err != nil:
		a.log.Warn("domain migrated away; looking it up failed, its payload images stay until the next start", "domain", name, "uuid", uuid, "err", err)
		return true
	case d.Active:
		return true // back again (migrated back, or started): its images are in use
	}
	return false
}
