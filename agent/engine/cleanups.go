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
