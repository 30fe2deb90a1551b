package agent

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
)

// registry tracks jobs the agent knows of in this run: queued, running and
// recently finished. Finished jobs beyond its capacity are forgotten; their
// results stay readable from the spool.
type registry struct {
	mu       sync.Mutex
	entries  map[string]*entry
	finished []string // ids in finishing order, for eviction
	capacity int
}

type entry struct {
	res  result.Result
	done chan struct{}
	// digest is the SHA-256 of the body the API queued this run of the
	// job with (zero for a spool job): an identical retry by the same
	// client is answered with this job (SubmitAs).
	digest [32]byte
}

func newRegistry(capacity int) *registry {
	return &registry{entries: map[string]*entry{}, capacity: capacity}
}

// set records a job's current state and wakes waiters when it is final.
// A new run of a finished id starts a new entry; callers make sure that it
// is its submitter's (Agent.foreignID, SubmitAs): nobody replaces another's
// status.
func (r *registry) set(res result.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[res.ID]
	if e == nil || e.res.State.Final() && !res.State.Final() {
		// a new run of an id replaces the finished one
		e = &entry{done: make(chan struct{})}
		r.entries[res.ID] = e
	}
	e.res = res
	if res.State.Final() {
		select {
		case <-e.done:
		default:
			close(e.done)
		}
		r.finished = append(r.finished, res.ID)
		for len(r.finished) > r.capacity {
			old := r.finished[0]
			r.finished = r.finished[1:]
			if oe := r.entries[old]; oe != nil && oe.res.State.Final() {
				delete(r.entries, old)
			}
		}
	}
}

// setGuest replaces the guest section of a job it knows.
func (r *registry) setGuest(id string, g *result.Guest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil && e.res.State.Final() {
		e.res.Guest = g
	}
}

// forget drops a non-final entry (a submission that could not be queued).
func (r *registry) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil && !e.res.State.Final() {
		delete(r.entries, id)
	}
}

// forgetQueued drops id's entry while it is still queued from source: a
// job the API queued whose file left incoming/ unclaimed.
func (r *registry) forgetQueued(id, source string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil && e.res.State == result.StateQueued && e.res.Source == source {
		delete(r.entries, id)
	}
}

// setDigest records the body digest of id's current (API-queued) run.
func (r *registry) setDigest(id string, d [32]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil {
		e.digest = d
	}
}

// digest returns the body digest of id's current run (zero if none).
func (r *registry) digest(id string) [32]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil {
		return e.digest
	}
	return [32]byte{}
}

func (r *registry) get(id string) (result.Result, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil {
		return result.Result{}, false
	}
	return e.res, true
}

// wait blocks until id is final or ctx ends, and returns its latest state.
func (r *registry) wait(ctx context.Context, id string) (result.Result, bool) {
	r.mu.Lock()
	e := r.entries[id]
	r.mu.Unlock()
	if e == nil {
		return result.Result{}, false
	}
	select {
	case <-e.done:
	case <-ctx.Done():
	}
	return r.get(id)
}

// list returns up to n jobs, newest received first.
func (r *registry) list(n int) []result.Result {
	r.mu.Lock()
	out := make([]result.Result, 0, len(r.entries))
	for _, e := range r.entries {
		out = append(out, e.res)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b result.Result) int {
		return cmp.Or(b.ReceivedAt.Compare(a.ReceivedAt), strings.Compare(a.ID, b.ID))
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// Event is one line of the /v1/events stream.
type Event struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"` // "job", "domain", "libvirt" or "guest"
	Type   string    `json:"type"` // job: received|running|done|failed; domain: defined|undefined|started|stopped; libvirt: disconnected|reconnected
	ID     string    `json:"id,omitempty"`
	Domain string    `json:"domain,omitempty"`
	UUID   string    `json:"uuid,omitempty"`
	Error  string    `json:"error,omitempty"`
	// Submitter is who submitted the job (job events only).
	Submitter *result.Submitter `json:"submitter,omitempty"`
	// Guest is the job's guest section (guest events: kind "guest", type
	// guest_ready, guest_failed, guest_timeout or guest_running).
	Guest *result.Guest `json:"guest,omitempty"`
}

// hub fans events out to subscribers. A subscriber that does not keep up
// loses events rather than slowing the agent down.
type hub struct {
	mu   sync.Mutex
	subs map[chan Event]struct{}
}

func newHub() *hub { return &hub{subs: map[chan Event]struct{}{}} }

func (h *hub) publish(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

func (h *hub) subscribe() (<-chan Event, func()) {
	ch := make(chan Event, 256)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, sync.OnceFunc(func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	})
}
