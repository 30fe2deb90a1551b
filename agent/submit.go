// What the API serves: submitting a job over the socket, looking up
// results, waiting for one, the event stream and health.

package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/vmpayload/vmpayload/agent/access"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// SubmitAs checks a job posted to the API by who (payload.Check, with the
// engine's CheckOptions: every problem at once; the access policy before
// any secret is read) and queues it through
// the spool, so that it survives a crash like any dropped file. It returns
// the job id; a *job.ValidationError for an invalid job, an
// *access.ForbiddenError when who may not use a field of it.
func (a *Agent) SubmitAs(data []byte, who result.Submitter) (string, error) {
	opt := a.eng.Load().CheckOptions()
	// payload.Check in two steps: the policy (privileged fields, and the
	// secrets who may use) decides between the job's own fields and the
	// reading of its secrets, so that a refused job learns nothing about a
	// secret (whether it exists, is empty, parses) and nothing is built.
	j, rep := job.ParseWith(data, opt.Defaults)
	if j == nil {
		return "", rep.Err()
	}
	// An invalid job still goes through the policy and then the whole
	// check, so that its answer names every problem at once, as validate
	// and the spool do (TestOneCheckEverywhere).
	if errs := a.opt.Policy.Check(j, who, opt.SecretsDir); errs != nil {
		a.log.Warn("job refused", "domain", j.Domain, "field", errs[0].Field, "uid", who.UID, "user", who.User, "gid", who.GID, "pid", who.PID)
		return "", &access.ForbiddenError{Errors: errs}
	}
	payload.CheckParsed(j, &rep, opt)
	if err := rep.Err(); err != nil {
		return "", err
	}
	id := j.ID
	if id == "" {
		id = newID()
	}
	digest := sha256.Sum256(data)
	if err := a.checkID(id, who, digest); err != nil {
		if errors.Is(err, errSameJob) {
			return id, nil
		}
		return "", err
	}
	// Reserve a place: jobs queued or running plus jobs this API wrote
	// that intake has not claimed yet stay within queue_limit.
	a.mu.Lock()
	if a.closing {
		a.mu.Unlock()
		return "", ErrShuttingDown
	}
	if _, writing := a.viaSocket[id]; writing {
		a.mu.Unlock()
		return "", idError(id, ErrDuplicate, "is already queued")
	}
	if n := a.queued + len(a.viaSocket); n >= a.opt.QueueLimit {
		a.mu.Unlock()
		return "", fmt.Errorf("%w: %d jobs are queued or running (queue_limit %d); retry later", ErrQueueFull, n, a.opt.QueueLimit)
	}
	mine := &apiJob{who: who}
	a.viaSocket[id] = mine
	a.mu.Unlock()
	a.reg.set(result.Result{ID: id, Domain: j.Domain, Action: string(j.Apply(opt.Defaults).Action), State: result.StateQueued, Source: result.SourceSocket, Submitter: &who, ReceivedAt: time.Now().UTC()})
	a.reg.setDigest(id, digest)
	if err := a.spool.PutOwned(id, data, int(who.UID)); err != nil {
		a.mu.Lock()
		if a.viaSocket[id] == mine {
			delete(a.viaSocket, id)
		}
		a.mu.Unlock()
		a.reg.forget(id)
		if errors.Is(err, spool.ErrExists) {
			return "", idError(id, ErrDuplicate, "is already queued")
		}
		return "", fmt.Errorf("writing job %q into the spool: %w", id, err)
	}
	a.mu.Lock()
	a.putSeq++
	mine.seq = a.putSeq // intake may have claimed it already: then it is gone from viaSocket
	a.mu.Unlock()
	a.met.JobReceived(metrics.SourceSocket)
	a.poke()
	return id, nil
}

// ErrIDTaken is returned (in an *IDError) by SubmitAs for a job whose id is
// another submitter's.
var ErrIDTaken = errors.New("the id is another submitter's job; choose another id")

// IDError is a submission refused because of its id: ErrDuplicate (a job
// with this id is queued or running) or ErrIDTaken. Errors names the field
// (id) and quotes the value; the API answers 409 with them.
type IDError struct {
	ID     string
	Err    error
	Errors []job.FieldError
}

func (e *IDError) Error() string { return fmt.Sprintf("job id %q: %v", e.ID, e.Err) }

func (e *IDError) Unwrap() error { return e.Err }

func idError(id string, err error, what string) *IDError {
	code := job.CodeDuplicate
	if errors.Is(err, ErrIDTaken) {
		code = job.CodeConflict
	}
	return &IDError{ID: id, Err: err, Errors: []job.FieldError{{Field: "id", Code: code,
		Message: fmt.Sprintf("job id %q %s; choose another id", id, what)}}}
}

// errSameJob: the submission is a retry of a job its client queued and that
// is still queued or running (same uid, same body): it is answered with
// that job instead of running it twice.
var errSameJob = errors.New("the same job is already queued")

// checkID refuses an id that is another submitter's: one queued or running
// (for everyone, root included), or finished in this run or with a result
// in the spool (for everyone but root, who may reuse any finished id, as in
// the spool). The id of a job that who queued and that is still queued or
// running is refused as a duplicate, unless the body is the same (a retry:
// errSameJob). A finished job of who's own runs again (as always).
func (a *Agent) checkID(id string, who result.Submitter, digest [32]byte) error {
	if cur, ok := a.reg.get(id); ok {
		owner := cur.Submitter
		switch {
		case owner != nil && owner.UID != who.UID && (!cur.State.Final() || who.UID != 0):
			return idError(id, ErrIDTaken, "is another submitter's job")
		case !cur.State.Final():
			if owner != nil && cur.Source == result.SourceSocket && a.reg.digest(id) == digest {
				return errSameJob
			}
			return idError(id, ErrDuplicate, "is already queued or running")
		}
		return nil
	}
	if who.UID == 0 {
		return nil
	}
	if uid, ok := a.spool.ResultOwner(id); ok && uid != who.UID {
		return idError(id, ErrIDTaken, "is another submitter's job")
	}
	return nil
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
	q := a.queued + len(a.viaSocket) // what queue_limit counts
	a.mu.Unlock()
	conn := "connected"
	if !a.libvirtConnected() {
		conn = "disconnected"
	}
	h := map[string]any{"status": "ok", "libvirt": conn, "queued": q, "in_flight": a.inflight.Load(), "libvirt_reconnects": a.opt.Host.Reconnects()}
	a.mu.Lock()
	h["results_pending"] = len(a.unwritten)
	_, reasons := a.degradedLocked()
	if len(reasons) > 0 {
		h["status"], h["reasons"] = "degraded", reasons
	}
	a.mu.Unlock()
	return h
}

// libvirtConnected reports whether the libvirt connection is up, as far as
// the host can tell (one that cannot is taken as connected). /healthz's
// "libvirt" and vmpayload_libvirt_connected read it.
func (a *Agent) libvirtConnected() bool {
	c, ok := a.opt.Host.(interface{ Connected() bool })
	return !ok || c.Connected()
}

// degradedAreas returns the areas /healthz reports degraded now, for
// vmpayload_health_degraded.
func (a *Agent) degradedAreas() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	areas, _ := a.degradedLocked()
	return areas
}

// degradedLocked returns the areas in which the agent is degraded and the
// reasons /healthz lists, in metrics.Areas order. Called with mu held.
func (a *Agent) degradedLocked() (areas, reasons []string) {
	for _, area := range metrics.Areas {
		r, ok := a.faults[area]
		switch {
		case area == faultResults && len(a.unwritten) > 0:
			msg := fmt.Sprintf("job results not written yet (retrying with backoff; %d waiting)", len(a.unwritten))
			if ok {
				msg += ": " + r // the last write error
			}
			areas, reasons = append(areas, area), append(reasons, msg)
		case area == faultResults:
			// all written since; the retrier clears the fault
		case ok:
			areas, reasons = append(areas, area), append(reasons, r)
		}
	}
	return areas, reasons
}
