// The job queue: jobs come in from the spool (intake, and sweep for the
// ones a crash or a failed claim left in processing/) or from the socket
// (Submit), wait in per-domain order, and are run by the workers, which
// report each result to the spool, the registry, events and metrics.

package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/vmpayload/vmpayload/agent/access"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// task is a claimed job waiting for or in execution.
type task struct {
	claimed *spool.Claimed
	job     *job.Job // nil when the file did not parse
	report  job.Report
	base    result.Result
	key     string // serialisation key: the domain
	policy  access.Policy
	// foreign: the job's id is another submitter's (foreignID); the job
	// fails forbidden on id, its result goes to its own file and the
	// registry keeps the other's status.
	foreign bool
	// secretsDir is the secrets_dir the job's secrets resolve in, for
	// the policy's check of who may use them
	secretsDir string
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
// batches (one directory sync per batch). A name that cannot be claimed
// (taken by another claimer, a job of that name still in processing/, an
// error) takes no room: the names after it are claimed instead.
func (a *Agent) intake() {
	a.mu.Lock()
	seen := a.putSeq
	a.mu.Unlock()
	names, err := a.spool.Pending()
	if err != nil {
		a.log.Error("listing the spool", "err", err)
		return
	}
	a.reconcileAPIJobs(names, seen)
	a.mu.Lock()
	room, closing := a.opt.QueueLimit-a.queued, a.closing
	a.mu.Unlock()
	for !closing && room > 0 && len(names) > 0 {
		batch := names[:min(room, len(names))]
		names = names[len(batch):]
		claimed, errs := a.spool.ClaimAll(batch)
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
		room -= len(claimed)
	}
}

// apiJob is a job the API writes or wrote into incoming/ for a client.
type apiJob struct {
	who result.Submitter
	// seq is the putSeq its write completed with; 0 while it is written.
	seq uint64
}

// reconcileAPIJobs forgets the API-written jobs whose file is no longer in
// incoming/ (names, listed after the writes up to putSeq seen had
// completed) although intake never claimed it: its owner renamed or
// removed it. Their places in queue_limit are freed, and their queued
// entries dropped (a renamed file is claimed under its new name as the
// owner's spool job). Without this the count only ever went up (issue 44).
func (a *Agent) reconcileAPIJobs(names []string, seen uint64) {
	present := make(map[string]bool, len(names))
	for _, n := range names {
		present[n] = true
	}
	var gone []string
	a.mu.Lock()
	for id, j := range a.viaSocket {
		if j.seq != 0 && j.seq <= seen && !present[id+".json"] {
			delete(a.viaSocket, id)
			gone = append(gone, id)
		}
	}
	a.mu.Unlock()
	for _, id := range gone {
		a.reg.forgetQueued(id, result.SourceSocket)
		a.log.Info("a job the API queued left incoming/ before it was claimed (renamed or removed); its queue place is freed", "id", id)
	}
}

// socketSubmitter returns the API client that submitted job id when c is
// the very file the API wrote for it (spool.PutOwned: named ID.json and
// owned by the client, or by the agent when it cannot chown), and forgets
// it. Another file claiming the same id in its content (a spool writer's)
// gets its own owner as submitter, never the API client's identity.
func (a *Agent) socketSubmitter(c *spool.Claimed, id string) (result.Submitter, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	j, ok := a.viaSocket[id]
	if !ok {
		return result.Submitter{}, false
	}
	if c.Name != id+".json" || (c.UID != j.who.UID && int(c.UID) != os.Geteuid()) {
		return result.Submitter{}, false
	}
	delete(a.viaSocket, id)
	return j.who, true
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
		if s, ok := a.socketSubmitter(c, t.base.ID); ok {
			t.base.Source = result.SourceSocket
			t.base.Submitter = &s
		}
		if t.base.Submitter == nil {
			s := access.FileOwner(c.UID, c.GID)
			t.base.Submitter = &s
		}
		t.job, t.secretsDir = j, opt.SecretsDir
		// The job's secrets are read (and checked) only when its
		// submitter may use them all: a refused job learns nothing
		// about a secret, not even from an invalid_job report. It fails
		// with forbidden when it runs (execute asks the policy again).
		if j == nil || t.forbidden() == nil {
			payload.CheckParsed(j, &rep, opt)
		}
		t.report = rep
		if j != nil {
			t.base.Domain, t.base.Action = j.Domain, string(j.Apply(opt.Defaults).Action)
		}
	}
	if t.base.Submitter == nil {
		s := access.FileOwner(c.UID, c.GID)
		t.base.Submitter = &s
	}
	t.key = queueKey(t.base.Domain)
	t.foreign = a.foreignID(t.base.ID, t.base.Submitter.UID, c)
	c.Foreign = t.foreign
	return t
}

// foreignID reports whether job id belongs to another submitter than uid:
// a job of theirs queued or running in this run (for everyone, root
// included), or a finished one, of this run or with a result in the spool
// (for everyone but root, who may reuse any finished id).
func (a *Agent) foreignID(id string, uid uint32, c *spool.Claimed) bool {
	if cur, ok := a.reg.get(id); ok && cur.Submitter != nil && cur.Submitter.UID != uid {
		if !cur.State.Final() || uid != 0 {
			return true
		}
	}
	return a.spool.ForeignID(c, id)
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
	if !t.foreign {
		a.reg.set(t.base)
	}
	a.pending[t.key] = append(a.pending[t.key], t)
	if !a.active[t.key] {
		a.active[t.key] = true
		a.ready = append(a.ready, t.key)
		a.readyCond.Signal()
	}
	a.mu.Unlock()
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

// forbidden returns the privileged fields and the secrets of t's job its
// submitter may not use (agent/access); the job then fails before libvirt
// is asked anything.
func (t *task) forbidden() []job.FieldError {
	if t.job == nil || t.base.Submitter == nil {
		return nil
	}
	return t.policy.Check(t.job, *t.base.Submitter, t.secretsDir)
}

func (a *Agent) execute(ctx context.Context, t *task) {
	a.met.InFlight(int(a.inflight.Add(1)))
	defer func() { a.met.InFlight(int(a.inflight.Add(-1))) }()
	running := t.base
	running.State = result.StateRunning
	if !t.foreign {
		a.reg.set(running)
	}
	a.events.publish(Event{Kind: "job", Type: "running", ID: t.base.ID, Domain: t.base.Domain, Submitter: t.base.Submitter})

	res := t.base
	var forbidden []job.FieldError
	if t.claimed.ReadErr == nil && t.report.OK() {
		forbidden = t.forbidden()
	}
	switch {
	case t.claimed.ReadErr != nil:
		res.Fail(result.CodeBadFile, t.claimed.ReadErr.Error(), "")
	case !t.report.OK():
		res.Fail(result.CodeInvalidJob, (&t.report).Err().Error(), t.report.Errors[0].Field)
		res.Errors = t.report.Errors
	case t.foreign:
		res.Fail(result.CodeForbidden, fmt.Sprintf("job id %q is another submitter's job; choose another id (this result is %s)",
			t.base.ID, a.spool.ForeignResultPath(t.base.ID, t.claimed.UID)), "id")
	case forbidden != nil:
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

// report publishes a job's outcome once its result is written: registry
// (unless the job's id is another submitter's), metrics, event and log.
func (a *Agent) report(t *task, res result.Result) {
	if !t.foreign {
		a.reg.set(res)
	}
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
	if !t.foreign {
		a.guest.finished(res)
	}
}

func (a *Agent) finishCount() {
	a.mu.Lock()
	a.queued--
	q := a.queued
	a.mu.Unlock()
	a.met.QueueDepth(q)
	a.poke() // room for more
}
