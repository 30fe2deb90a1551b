package api

import (
	"context"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/payload/job"
)

// The admission rules: tenants together stay out of root's reserve, one
// uid takes at most half of the tenants' part, root is admitted while
// tenants hold all they may, and a release lets a waiter in.
func TestAdmissionRules(t *testing.T) {
	const mib = 1 << 20
	a := newAdmission(512*mib, 64*mib, 32, 4)
	ctx := context.Background()
	try := func(uid uint32, w int64) (func(), bool) { return a.acquire(ctx, uid, w, time.Millisecond) }
	var held []func()
	// uid 1000 takes its share: 224 MiB (3 × 64, then 32 more).
	for i := 0; i < 3; i++ {
		r, ok := try(1000, 64*mib)
		if !ok {
			t.Fatalf("uid 1000's large submission %d refused", i)
		}
		held = append(held, r)
	}
	r, ok := try(1000, 32*mib)
	if !ok {
		t.Fatal("uid 1000's small submission refused within its share")
	}
	held = append(held, r)
	if _, ok := try(1000, 1); ok {
		t.Fatal("uid 1000 admitted beyond half the tenants' part")
	}
	// uid 1001 takes the rest of the tenants' part (224 MiB).
	for i := 0; i < 7; i++ {
		r, ok := try(1001, 32*mib)
		if !ok {
			t.Fatalf("uid 1001's submission %d refused", i)
		}
		held = append(held, r)
	}
	if _, ok := try(1002, 32*mib); ok {
		t.Fatal("a third tenant admitted into root's reserve")
	}
	// Root gets the reserve, even for the largest submission.
	rr, ok := try(0, submitCost(job.MaxJobBytes))
	if !ok {
		t.Fatal("root refused while tenants hold their part")
	}
	rr()
	// A release lets a waiting tenant in.
	got := make(chan bool)
	go func() {
		_, ok := a.acquire(ctx, 1002, 32*mib, time.Hour)
		got <- ok
	}()
	time.Sleep(10 * time.Millisecond) // not needed for correctness: the waiter may also start after the release
	held[len(held)-1]()
	if !<-got {
		t.Fatal("the waiter was not admitted after a release")
	}
	// A weight over a tenant's share is taken as the share: it runs alone.
	b := newAdmission(512*mib, 64*mib, 32, 4)
	r2, ok := b.acquire(ctx, 1000, 1<<40, time.Millisecond)
	if !ok {
		t.Fatal("an oversized weight never fits")
	}
	r2()
	if b.used != 0 || b.count != 0 || len(b.byUID) != 0 {
		t.Errorf("after release: used %d, count %d, byUID %v", b.used, b.count, b.byUID)
	}
}

// The count bound holds too: MaxSubmits tenants' submissions, then only
// root, for RootSubmits more.
func TestAdmissionCount(t *testing.T) {
	a := newAdmission(1<<40, 0, 2, 1)
	ctx := context.Background()
	for i := uint32(0); i < 2; i++ {
		if _, ok := a.acquire(ctx, 1000+i, 1, time.Millisecond); !ok {
			t.Fatalf("submission %d refused", i)
		}
	}
	if _, ok := a.acquire(ctx, 1005, 1, time.Millisecond); ok {
		t.Fatal("a tenant admitted beyond MaxSubmits")
	}
	if _, ok := a.acquire(ctx, 0, 1, time.Millisecond); !ok {
		t.Fatal("root refused within RootSubmits")
	}
	if _, ok := a.acquire(ctx, 0, 1, time.Millisecond); ok {
		t.Fatal("root admitted beyond MaxSubmits+RootSubmits")
	}
}
