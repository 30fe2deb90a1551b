package engine

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

func TestDomainLocks(t *testing.T) {
	var l DomainLocks
	ctx := context.Background()
	const u = "6695eb01-f6a4-8304-79aa-97f2502e193f"
	unlock, waited, err := l.Lock(ctx, u)
	if err != nil || waited {
		t.Fatalf("first lock: waited %v err %v", waited, err)
	}
	// the same domain in another spelling waits; ctx ends the wait
	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, _, err := l.Lock(cctx, "6695EB01F6A4830479AA97F2502E193F")
		got <- err
	}()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting lock after cancel: %v", err)
	}
	// another domain does not wait
	u2, waited, err := l.Lock(ctx, "11111111-2222-3333-4444-555555555555")
	if err != nil || waited {
		t.Fatalf("other domain: waited %v err %v", waited, err)
	}
	u2()
	// a waiter gets the lock once it is released, and says it waited
	done := make(chan bool, 1)
	go func() {
		un, waited, err := l.Lock(ctx, u)
		if err == nil {
			un()
		}
		done <- waited
	}()
	for l.users(u) < 2 {
		// wait until the goroutine is queued behind the holder
		runtime.Gosched()
	}
	unlock()
	unlock() // a second call is harmless
	if !<-done {
		t.Error("the second holder did not report that it waited")
	}
	if n := l.len(); n != 0 {
		t.Errorf("%d domains still tracked after every lock was released", n)
	}
}

// len reports how many domains are locked or waited for (tests).
func (l *DomainLocks) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// users reports the holders and waiters of uuid (tests).
func (l *DomainLocks) users(uuid string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := l.held[domxml.CanonicalUUID(uuid)]; d != nil {
		return d.users
	}
	return 0
}
