package engine

import (
	"context"
	"sync"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// DomainLocks serialise the jobs that change one domain, keyed by the
// domain's UUID as libvirt reports it. The agent queues jobs by the
// spelling of their domain field, so a job naming a domain and one giving
// its UUID can be handed to two workers at once; the lock makes the second
// wait until the first has finished reading, changing and redefining the
// domain. The zero value is ready; the agent shares one between its
// engines (a reload replaces the engine, not the jobs it runs).
type DomainLocks struct {
	mu   sync.Mutex
	held map[string]*domainLock
}

type domainLock struct {
	ch    chan struct{} // holds a token while the domain is locked
	users int           // holders and waiters
}

// Lock locks the domain uuid, waiting for the job that holds it, or until
// ctx ends. waited reports whether another job held it: the domain may
// have changed since the caller looked it up.
func (l *DomainLocks) Lock(ctx context.Context, uuid string) (unlock func(), waited bool, err error) {
	uuid = domxml.CanonicalUUID(uuid)
	l.mu.Lock()
	if l.held == nil {
		l.held = map[string]*domainLock{}
	}
	d := l.held[uuid]
	if d == nil {
		d = &domainLock{ch: make(chan struct{}, 1)}
		l.held[uuid] = d
	}
	d.users++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if d.users--; d.users == 0 {
			delete(l.held, uuid)
		}
		l.mu.Unlock()
	}
	select {
	case d.ch <- struct{}{}:
	default:
		waited = true
		select {
		case d.ch <- struct{}{}:
		case <-ctx.Done():
			release()
			return nil, true, ctx.Err()
		}
	}
	return sync.OnceFunc(func() {
		<-d.ch
		release()
	}), waited, nil
}
