package agenttest

import (
	"errors"
	"sync"
	"testing"
)

// Cleanups is a registry of clean-up steps run in reverse order of
// registration, like defers: what was set up last is torn down first. Run
// runs every step even when some fail and joins their errors. The zero
// value is ready to use; it is safe for concurrent use.
type Cleanups struct {
	mu  sync.Mutex
	fns []func() error
}

// Add registers f to run at Run.
func (c *Cleanups) Add(f func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, f)
}

// Run runs the registered steps, last first, once each, and returns their
// errors joined with errors.Join (nil when every step succeeded).
func (c *Cleanups) Run() error {
	c.mu.Lock()
	fns := c.fns
	c.fns = nil
	c.mu.Unlock()
	var errs []error
	for i := len(fns) - 1; i >= 0; i-- {
		errs = append(errs, fns[i]())
	}
	return errors.Join(errs...)
}

// ForTest returns a registry that tb runs in its t.Cleanup, reporting the
// joined error with tb.Error.
func ForTest(tb testing.TB) *Cleanups {
	c := &Cleanups{}
	tb.Cleanup(func() {
		if err := c.Run(); err != nil {
			tb.Error(err)
		}
	})
	return c
}
