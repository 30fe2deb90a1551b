package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
)

// Areas of /healthz "degraded" reasons (metrics.Areas is their order; they
// are the area label of vmpayload_health_degraded).
const (
	faultResults    = metrics.AreaResults
	faultSpool      = metrics.AreaSpool
	faultPayloadDir = metrics.AreaPayloadDir
	faultCleanup    = metrics.AreaCleanup
)

// Backoff between attempts to write pending results: it doubles from
// resultRetryMin up to resultRetryMax and starts again from resultRetryMin
// once a write succeeds.
const (
	resultRetryMin = 100 * time.Millisecond
	resultRetryMax = 2 * time.Second
)

// outcome is a finished job whose result is not written yet.
type outcome struct {
	t   *task
	res result.Result
	// retiring: the result was written by an earlier run, only the job
	// file is left to retire; it is not reported again.
	retiring bool
}

// complete writes a finished job's result (spool.Complete). When that fails
// (a full or read-only spool file system, a removed done/, an entry that
// cannot be moved aside), the outcome is kept and retried with backoff until
// it is written; only then is it reported (registry, events, metrics), so
// that a consumer never sees an outcome that a crash could still replace: a
// job whose result was not written runs again at the next start. One result
// that cannot be written holds back no other job's: only a later result of
// the same job id waits behind it (so that the newer one is the one left).
func (a *Agent) complete(t *task, res result.Result) {
	a.mu.Lock()
	behind := a.pendingIDLocked(res.ID, nil)
	a.mu.Unlock()
	if !behind {
		err := a.spool.Complete(t.claimed, res)
		if err == nil {
			a.retire(t.claimed.Name)
			a.report(t, res)
			return
		}
		a.log.Error("writing job result failed; retrying until it is written", "id", res.ID, "err", err)
		// The cause first: /healthz never shows a pending result without it.
		a.setFault(faultResults, err)
	}
	a.hold(&outcome{t: t, res: res})
}

// pendingIDLocked reports whether an outcome of job id waits in unwritten
// before upTo (nil: anywhere). Called with mu held.
func (a *Agent) pendingIDLocked(id string, upTo *outcome) bool {
	for _, o := range a.unwritten {
		if o == upTo {
			return false
		}
		if o.res.ID == id {
			return true
		}
	}
	return false
}

// hold queues an outcome for retryResults.
func (a *Agent) hold(o *outcome) {
	a.mu.Lock()
	a.unwritten = append(a.unwritten, o)
	n := len(a.unwritten)
	a.mu.Unlock()
	a.met.ResultsPending(n)
	select {
	case a.retryKick <- struct{}{}:
	default:
	}
}

// retire forgets a claim whose result is written and whose file left
// processing/.
func (a *Agent) retire(name string) {
	a.mu.Lock()
	delete(a.held, name)
	a.mu.Unlock()
}

// retryResults writes the pending results, oldest first, with backoff,
// until ctx ends.
func (a *Agent) retryResults(ctx context.Context) {
	backoff := resultRetryMin
	for {
		a.mu.Lock()
		n := len(a.unwritten)
		a.mu.Unlock()
		if n == 0 {
			backoff = resultRetryMin
			select {
			case <-ctx.Done():
				return
			case <-a.retryKick:
			}
			continue
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if a.flushResults() {
			backoff = resultRetryMin
		} else {
			backoff = min(backoff*2, resultRetryMax)
		}
	}
}

// flushResults tries to write every pending result, oldest first, and
// reports whether all of them are written. A result that fails again stays
// pending (with the later results of its job id) and the others are still
// written: one that cannot be written blocks nobody else's.
func (a *Agent) flushResults() bool {
	a.healSpool()
	a.mu.Lock()
	todo := append([]*outcome(nil), a.unwritten...)
	a.mu.Unlock()
	var lastErr error
	for _, o := range todo {
		a.mu.Lock()
		behind := a.pendingIDLocked(o.res.ID, o)
		a.mu.Unlock()
		if behind {
			continue // an older result of the same id is still pending
		}
		a.met.ResultRetry()
		if err := a.spool.Complete(o.t.claimed, o.res); err != nil {
			lastErr = err
			a.log.Debug("writing job result failed again", "id", o.res.ID, "err", err)
			continue
		}
		// Report before the outcome leaves unwritten: once /healthz no
		// longer counts it, the API already shows it final.
		a.retire(o.t.claimed.Name)
		if o.retiring {
			a.log.Info("finished job retired after retrying", "id", o.res.ID)
		} else {
			a.log.Info("job result written after retrying", "id", o.res.ID)
			a.report(o.t, o.res)
		}
		a.mu.Lock()
		a.unwritten = slices.DeleteFunc(a.unwritten, func(u *outcome) bool { return u == o })
		n := len(a.unwritten)
		a.mu.Unlock()
		a.met.ResultsPending(n)
	}
	a.mu.Lock()
	n := len(a.unwritten)
	a.mu.Unlock()
	if n == 0 {
		a.clearFault(faultResults)
		a.met.ResultsPending(0)
		return true
	}
	if lastErr != nil {
		a.setFault(faultResults, lastErr)
	}
	return false
}

// pruneEveryRescans is how many rescans apart the result retention is
// applied (besides at start-up): every 5 minutes with the default
// rescan_interval. One prune lists done/ and failed/ and stats each result:
// about 0.1 s of CPU at the default 10000 results (BenchmarkPruneSteady).
const pruneEveryRescans = 10

// prune applies the result retention (spool.Prune) to done/, failed/ and
// rejected/, sparing every job that is queued, running or has a result
// waiting to be written.
func (a *Agent) prune() {
	r := *a.retention.Load()
	if !r.On() {
		return
	}
	busy := func(id string) bool {
		if cur, ok := a.reg.get(id); ok && !cur.State.Final() {
			return true
		}
		if _, err := os.Lstat(filepath.Join(a.spool.Dir(spool.Processing), id+".json")); err == nil {
			return true
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.pendingIDLocked(id, nil)
	}
	n, err := a.spool.Prune(r, time.Now(), busy)
	if n > 0 {
		a.log.Info("removed results past their retention", "count", n, "result_retention_count", r.MaxCount, "result_retention_age", r.MaxAge)
	}
	if err != nil {
		a.log.Warn("result retention: some results could not be removed", "err", err)
	}
}

// heal recreates the spool subdirectories and the payload directory if
// they went missing, records or clears the health faults about them, and
// watches incoming/ again when it was recreated.
func (a *Agent) heal(w *fsnotify.Watcher) {
	if a.healSpool() && w != nil {
		in := a.spool.Dir(spool.Incoming)
		_ = w.Remove(in) // the old watch died with the directory
		if err := w.Add(in); err != nil {
			a.setFault(faultSpool, fmt.Errorf("watching the recreated %s: %w", in, err))
		}
	}
	_, err := a.eng.Load().EnsurePayloadDir()
	a.setFault(faultPayloadDir, err)
	if n, err := a.eng.Load().RetryCleanups(); n > 0 {
		a.setFault(faultCleanup, fmt.Errorf("%d superseded or orphaned payload images could not be removed (retried at each rescan): %w", n, err))
	} else {
		a.clearFault(faultCleanup)
	}
}

// healSpool recreates missing spool subdirectories and reports whether
// incoming/ was among them.
func (a *Agent) healSpool() (incoming bool) {
	created, err := a.spool.Heal()
	for _, d := range created {
		a.met.DirRecreated(metrics.DirSpool)
		a.log.Warn("spool directory was missing; recreated it", "dir", a.spool.Dir(d))
		incoming = incoming || d == spool.Incoming
	}
	a.setFault(faultSpool, err)
	return incoming
}

// setFault records why the agent is degraded in area; a nil err clears
// the fault (clearFault).
func (a *Agent) setFault(area string, err error) {
	if err == nil {
		a.clearFault(area)
		return
	}
	msg := err.Error()
	if area == faultPayloadDir && errors.Is(err, spool.ErrNotDir) {
		msg = "refusing to write payload images: " + msg
	}
	a.mu.Lock()
	prev, had := a.faults[area]
	a.faults[area] = msg
	a.mu.Unlock()
	if !had || (prev != msg && area != faultResults) {
		a.log.Warn("agent degraded", "area", area, "reason", msg)
	}
}

// clearFault forgets the fault of area.
func (a *Agent) clearFault(area string) {
	a.mu.Lock()
	_, had := a.faults[area]
	delete(a.faults, area)
	a.mu.Unlock()
	if had {
		a.log.Info("agent healed", "area", area)
	}
}
