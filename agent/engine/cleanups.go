package engine

import (
	"errors"
	"os"
	"sync"
)

// Cleanups holds the payload images whose removal failed (e.g. EROFS, EPERM
// on the payload directory), so that they are retried instead of being
// forgotten; the agent retries them at each rescan and reports "degraded"
// while any is pending. Shared by the agent's engines; the zero value is
// ready and a nil *Cleanups records nothing. Safe for concurrent use.
type Cleanups struct {
	mu sync.Mutex
	m  map[string]pendingRemoval // path → why it is to be removed
	// atStop holds files a running domain's QEMU was started with and no
	// definition names any more, by domain UUID (path → reason): they go
	// when the domain stops (DomainStopped). libvirt gives a started
	// domain's files their owner back when it stops, and one file gone
	// makes it skip the rest of that domain's files.
	atStop map[string]map[string]string
}

// deferUntilStop records path for removal when domain uuid stops.
func (c *Cleanups) deferUntilStop(uuid, path, reason string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.atStop == nil {
		c.atStop = map[string]map[string]string{}
	}
	if c.atStop[uuid] == nil {
		c.atStop[uuid] = map[string]string{}
	}
	c.atStop[uuid][path] = reason
}

// DomainStopped removes the files deferred until domain uuid stopped (a
// failed removal is retried at each rescan, like any other). The agent
// calls it for libvirt's stopped and undefined events.
func (e *Engine) DomainStopped(uuid string) {
	c := e.Cleanups
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, reason := range c.atStop[uuid] {
		err := os.Remove(p)
		switch {
		case err == nil:
			e.Metrics.ImageRemoved(reason)
			e.log().Info("removed payload file the stopped domain was started with", "path", p, "reason", reason, "uuid", uuid)
		case !errors.Is(err, os.ErrNotExist):
			if c.m == nil {
				c.m = map[string]pendingRemoval{}
			}
			c.m[p] = pendingRemoval{reason: reason, err: err}
		}
	}
	delete(c.atStop, uuid)
}

type pendingRemoval struct {
	reason string
	err    error
}

func (c *Cleanups) add(path, reason string, err error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]pendingRemoval{}
	}
	c.m[path] = pendingRemoval{reason: reason, err: err}
}

// cancel drops a pending removal of path: a job is about to use that image
// again (image names follow the content, so re-attached content has the
// same name). It holds the lock that retry removes under, so a removal
// never races a job that wants the image.
func (c *Cleanups) cancel(path string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, path)
	for _, set := range c.atStop {
		delete(set, path)
	}
}

// RetryCleanups tries every pending image removal again. It returns how
// many are still pending and the last error.
func (e *Engine) RetryCleanups() (int, error) {
	c := e.Cleanups
	if c == nil {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var last error
	for p, pr := range c.m {
		if !e.mayRemove(p, pr.reason) {
			delete(c.m, p) // another host claimed it meanwhile
			continue
		}
		err := os.Remove(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			c.m[p] = pendingRemoval{reason: pr.reason, err: err}
			last = err
			continue
		}
		delete(c.m, p)
		if err == nil {
			e.forget(p)
			e.Metrics.ImageRemoved(pr.reason)
			e.log().Info("removed payload image after retrying", "path", p, "reason", pr.reason)
		}
	}
	return len(c.m), last
}
