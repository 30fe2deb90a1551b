package agent

import (
	"context"
	"os"

	"github.com/vmpayload/vmpayload/agent/access"
	"github.com/vmpayload/vmpayload/agent/result"
)

// Submit is SubmitAs on behalf of the agent's own user.
func (a *Agent) Submit(data []byte) (string, error) {
	return a.SubmitAs(data, access.FileOwner(uint32(os.Geteuid()), uint32(os.Getegid())))
}

// HoldGuestLoad makes the guest report follower's start-up reading of done/
// wait until release is closed (or the agent stops), for the tests of what
// must not wait for it.
func HoldGuestLoad(a *Agent, release <-chan struct{}) {
	read := a.guest.eachDone
	a.guest.eachDone = func(ctx context.Context, fn func(result.Result), bad func(string, error)) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return read(ctx, fn, bad)
	}
}

// GuestLoaded is closed when the follower's start-up reading is over.
func GuestLoaded(a *Agent) <-chan struct{} { return a.guest.loaded }
