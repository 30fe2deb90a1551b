package api

import (
	"context"
	"sync"
	"time"

	"github.com/vmpayload/vmpayload/payload/job"
)

// Admission of POST /v1/jobs (docs/reliability.md, "Admission") is in two
// steps, each a weighted semaphore with a reserve for root and a share per
// tenant uid (admission): reading the body, weighed by its length within
// BodyBudget, then checking the job, weighed by its estimated memory
// (submitCost: a fixed part for what gzip and YAML may inflate any job to,
// plus a part per byte for the JSON tree) within SubmitBudget.
const (
	// submitBaseCost is the estimated cost of any submission.
	submitBaseCost = 32 << 20
	// submitCostPerByte is the estimated cost of each byte of body.
	submitCostPerByte = 32
	// DefaultSubmitBudget is the estimated memory all submissions being
	// read and checked at once may cost: 512 MiB, which with the agent's
	// own use and the Go runtime's headroom stays below a MemoryMax of
	// 1 GiB: 32 of the worst submissions posted at once peak at 579 MiB
	// RSS (834 MiB when all 32 are checked at once;
	// BenchmarkConcurrentWorstCase, docs/reliability.md).
	DefaultSubmitBudget = 512 << 20
	// RootSubmitReserve is the part of the budget only root (uid 0) may
	// use: room for one submission of the largest size, so that root is
	// admitted however many tenants' submissions are in progress.
	RootSubmitReserve = submitBaseCost + submitCostPerByte*job.MaxJobBytes
)

// BodyBudget is how many bytes of bodies n submission slots may be
// reading at once: n of the largest bodies, as the slots of ef40b13 held.
// Reading a body costs its bytes, for as long as the client takes
// (BodyTimeout at most); checking the job (SubmitBudget) comes after, once
// the body is in, and takes no longer than the check.
func BodyBudget(n int) int64 { return int64(n) * job.MaxJobBytes }

// bodyWeight is what reading a body of n bytes (-1 unknown) holds.
func bodyWeight(n int64) int64 {
	if n < 0 || n > job.MaxJobBytes {
		return job.MaxJobBytes
	}
	return max(n, 4<<10)
}

// submitCost estimates what a submission whose body is n bytes (-1 for
// unknown, taken as job.MaxJobBytes) may cost in memory.
func submitCost(n int64) int64 {
	if n < 0 || n > job.MaxJobBytes {
		n = job.MaxJobBytes
	}
	return submitBaseCost + submitCostPerByte*n
}

// admission is a weighted semaphore with a reserve for root and a share
// for each other uid: non-root submissions together use at most
// budget-reserve, and one uid at most half of that, so that one tenant
// cannot keep another (or root) out. Counted submissions are bounded too
// (maxCount, plus rootCount more for root).
type admission struct {
	budget, reserve int64
	maxCount        int
	rootCount       int

	mu    sync.Mutex
	used  int64
	count int
	byUID map[uint32]int64
	freed chan struct{} // closed, and replaced, whenever weight is released
}

func newAdmission(budget, reserve int64, maxCount, rootCount int) *admission {
	return &admission{budget: budget, reserve: reserve, maxCount: maxCount, rootCount: rootCount,
		byUID: map[uint32]int64{}, freed: make(chan struct{})}
}

// fits reports whether a submission of weight w from uid may start now.
// A weight larger than the submitter's whole allowance is taken as that
// allowance (such a submission runs when nothing else of its kind does).
func (a *admission) fits(uid uint32, w int64) (int64, bool) {
	if uid == 0 {
		w = min(w, a.budget)
		return w, a.used+w <= a.budget && a.count < a.maxCount+a.rootCount
	}
	tenants := a.budget - a.reserve
	share := tenants / 2
	w = min(w, share)
	var nonRoot int64
	for u, n := range a.byUID {
		if u != 0 {
			nonRoot += n
		}
	}
	return w, nonRoot+w <= tenants && a.byUID[uid]+w <= share && a.used+w <= a.budget && a.count < a.maxCount
}

// acquire waits up to wait (or until ctx ends) for room for a submission
// of weight w from uid; ok false means there was none. release must be
// called once the submission is answered.
func (a *admission) acquire(ctx context.Context, uid uint32, w int64, wait time.Duration) (release func(), ok bool) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		a.mu.Lock()
		got, fits := a.fits(uid, w)
		if fits {
			a.used += got
			a.count++
			a.byUID[uid] += got
			a.mu.Unlock()
			return sync.OnceFunc(func() { a.release(uid, got) }), true
		}
		freed := a.freed
		a.mu.Unlock()
		select {
		case <-freed:
		case <-timer.C:
			return nil, false
		case <-ctx.Done():
			return nil, false
		}
	}
}

func (a *admission) release(uid uint32, w int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used -= w
	a.count--
	if a.byUID[uid] -= w; a.byUID[uid] <= 0 {
		delete(a.byUID, uid)
	}
	close(a.freed)
	a.freed = make(chan struct{})
}
