package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/internal/atomicfile"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/guestreport"
)

// Guest reports: the agent side of docs/guest-report.md. Per domain it
// follows the latest done job whose result has a guest section, holds the
// report channel while the domain runs and writes each report into that
// result; the results in done/ are what a restarted agent reads back.

// GuestDir is the spool subdirectory of the guest follower's markers.
const GuestDir = "guest"

// goneSuffix ends the name of the marker of an undefined domain in GuestDir.
// (Files named <uuid>.json there are the per-domain state files of older
// versions; start removes them, the results hold what they said.)
const goneSuffix = ".gone"

// DefaultGuestTimeout is guest_timeout's default.
const DefaultGuestTimeout = 15 * time.Minute

// guestTrack is the followed job of one domain.
type guestTrack struct {
	JobID  string `json:"job_id"`
	State  string `json:"state"`
	Domain string `json:"domain"`
	UUID   string `json:"uuid"`
	// FinishedAt is the job's finishing time, as in its result: with
	// JobID it tells the result apart from a later run of the same id.
	FinishedAt time.Time `json:"finished_at"`
}

// trackOf returns the track res asks for: ok is false when res ends the
// following of its domain (a detach, a payload without the report) or is
// not a done job on a domain.
func trackOf(res result.Result) (tr guestTrack, ok bool) {
	if res.State != result.StateDone || res.DomainUUID == "" || res.Action == "detach" || res.Guest == nil {
		return guestTrack{}, false
	}
	tr = guestTrack{JobID: res.ID, State: string(res.State), Domain: res.Domain, UUID: res.DomainUUID}
	if res.FinishedAt != nil {
		tr.FinishedAt = *res.FinishedAt
	}
	return tr, true
}

// later reports whether result a finished after b (the same time: the
// greater id, so that the choice does not depend on reading order).
func later(a, b result.Result) bool {
	var ta, tb time.Time
	if a.FinishedAt != nil {
		ta = *a.FinishedAt
	}
	if b.FinishedAt != nil {
		tb = *b.FinishedAt
	}
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.ID > b.ID
}

// guests follows the report channels of the agent's domains.
type guests struct {
	a   *Agent
	dir string
	// dial connects to a channel's host socket (net.Dial; tests replace it).
	dial func(path string) (net.Conn, error)
	// eachDone reads the results in done/ (Spool.EachDone; tests hold it).
	eachDone func(ctx context.Context, fn func(result.Result), bad func(name string, err error)) error
	// retry is the pause between connection attempts; gap the shortest
	// time between two reports applied from one connection (minReportGap).
	retry, gap time.Duration

	mu       sync.Mutex
	watching map[string]context.CancelFunc // by domain UUID
	// tracks is the followed job of each domain, by domain UUID: from the
	// results in done/ at start, then from each finished job.
	tracks map[string]guestTrack
	// touched holds the domains whose following a finished job or a
	// forget decided while start was reading done/ (nil once it is done):
	// those decisions are newer than what it read.
	touched map[string]bool
	changed chan struct{} // closed and replaced at each guest update
	loaded  chan struct{} // closed when start has read done/ (or was stopped)
	ctx     context.Context
	wg      sync.WaitGroup
}

func newGuests(a *Agent) *guests {
	return &guests{a: a, dir: filepath.Join(a.spool.Root, GuestDir), eachDone: a.spool.EachDone, retry: time.Second, gap: minReportGap,
		dial: func(p string) (net.Conn, error) {
			return net.DialTimeout("unix", p, 5*time.Second)
		},
		watching: map[string]context.CancelFunc{}, tracks: map[string]guestTrack{}, touched: map[string]bool{}, changed: make(chan struct{}), loaded: make(chan struct{}), ctx: context.Background()}
}

func (g *guests) gonePath(uuid string) string { return filepath.Join(g.dir, uuid+goneSuffix) }

// start resumes the following of the agent's domains (an agent restart):
// in the background, so that a long done/ does not hold back the agent's
// readiness, it finds each domain's followed job from the latest done
// results and the markers of undefined domains, and starts their watches.
// Jobs that finish meanwhile win over what it reads (touched). ctx ends the
// reading and every watch; loaded is closed when the reading is over.
func (g *guests) start(ctx context.Context) {
	g.mu.Lock()
	g.ctx = ctx
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		defer close(g.loaded)
		g.load(ctx)
	}()
}

// load is start's reading of guest/ and done/.
func (g *guests) load(ctx context.Context) {
	t0 := time.Now()
	gone := map[string]guestTrack{}
	var legacy []string
	ents, err := os.ReadDir(g.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		g.a.log.Warn("reading the guest report state", "dir", g.dir, "err", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		if uuid, ok := strings.CutSuffix(name, goneSuffix); ok {
			var tr guestTrack
			b, err := os.ReadFile(filepath.Join(g.dir, name))
			if err == nil {
				err = json.Unmarshal(b, &tr)
			}
			if err != nil {
				g.a.log.Warn("ignoring a damaged guest report marker", "path", filepath.Join(g.dir, name), "err", err)
				continue
			}
			gone[uuid] = tr
		} else if strings.HasSuffix(name, ".json") {
			legacy = append(legacy, name)
		}
	}
	latest := map[string]result.Result{}
	read := 0
	err = g.eachDone(ctx, func(r result.Result) {
		read++
		if r.DomainUUID == "" {
			return
		}
		if cur, ok := latest[r.DomainUUID]; !ok || later(r, cur) {
			latest[r.DomainUUID] = r
		}
	}, func(name string, err error) {
		g.a.log.Warn("ignoring a result the guest report follower cannot read", "file", name, "err", err)
	})
	if ctx.Err() != nil {
		return // stopping: the next start reads them again
	}
	if err != nil {
		g.a.log.Warn("reading the results for the guest report state; no guest is followed until its domain's next job", "err", err)
	}
	var follow []string
	g.mu.Lock()
	for uuid, r := range latest {
		tr, ok := trackOf(r)
		if !ok || g.touched[uuid] {
			continue
		}
		if m, isGone := gone[uuid]; isGone && m.JobID == tr.JobID && m.FinishedAt.Equal(tr.FinishedAt) {
			continue // undefined while this job was followed
		}
		g.tracks[uuid] = tr
		follow = append(follow, uuid)
	}
	g.touched = nil
	// Under mu, so that a marker gone writes meanwhile is not taken for
	// the stale one read above.
	for uuid, m := range gone {
		if r, ok := latest[uuid]; ok && r.ID == m.JobID && r.FinishedAt != nil && r.FinishedAt.Equal(m.FinishedAt) {
			continue
		}
		// a newer job of the domain (or none left): the marker says nothing
		if err := os.Remove(g.gonePath(uuid)); err != nil && !errors.Is(err, os.ErrNotExist) {
			g.a.log.Warn("removing a stale guest report marker", "uuid", uuid, "err", err)
		}
	}
	g.mu.Unlock()
	for _, name := range legacy {
		// an older version's state file: the results say the same
		if err := os.Remove(filepath.Join(g.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			g.a.log.Warn("removing an old guest report state file", "file", name, "err", err)
		}
	}
	for _, uuid := range follow {
		g.watch(uuid, nil)
	}
	g.a.log.Info("guest report follower resumed", "followed", len(follow), "results_read", read,
		"duration_ms", time.Since(t0).Milliseconds())
}

// stop ends every watch and waits for them.
func (g *guests) stop() {
	g.mu.Lock()
	for _, c := range g.watching {
		c()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// finished is told of every job whose result was written.
func (g *guests) finished(res result.Result) {
	if res.State != result.StateDone || res.DomainUUID == "" {
		return
	}
	tr, ok := trackOf(res)
	if !ok {
		// A detach, or a payload without the report replaced one with it:
		// the result written says so.
		g.forget(res.DomainUUID)
		return
	}
	g.mu.Lock()
	g.tracks[tr.UUID] = tr
	if g.touched != nil {
		g.touched[tr.UUID] = true
	}
	g.mu.Unlock()
	// res is the result just written: the watch starts from it instead
	// of reading the file back.
	g.restart(res.DomainUUID, &res)
}

// loadTrack returns domain uuid's followed job.
func (g *guests) loadTrack(uuid string) (guestTrack, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	tr, ok := g.tracks[uuid]
	return tr, ok
}

// forget stops following domain uuid (detached, its payload replaced by one
// without the report).
func (g *guests) forget(uuid string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forgetLocked(uuid)
}

func (g *guests) forgetLocked(uuid string) {
	if c := g.watching[uuid]; c != nil {
		c()
		delete(g.watching, uuid)
	}
	delete(g.tracks, uuid)
	if g.touched != nil {
		g.touched[uuid] = true
	}
}

// gone stops following domain uuid because it was undefined, and records
// that in a marker (the domain's results still name the job).
func (g *guests) gone(uuid string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	tr, ok := g.tracks[uuid]
	g.forgetLocked(uuid)
	if !ok {
		return
	}
	b, err := json.Marshal(tr)
	if err == nil {
		err = os.MkdirAll(g.dir, 0o700)
	}
	if err == nil {
		err = atomicfile.WriteFile(g.gonePath(uuid), b, 0o600, -1)
	}
	if err != nil {
		g.a.log.Warn("recording that an undefined domain's guest is no longer followed; after a restart a domain defined with its UUID may be taken for it", "uuid", uuid, "err", err)
	}
}

// started is told of every domain start.
func (g *guests) started(uuid string) { g.watch(uuid, nil) }

// restart replaces a running watch of uuid (its job changed, to the one
// of res).
func (g *guests) restart(uuid string, res *result.Result) {
	g.mu.Lock()
	if c := g.watching[uuid]; c != nil {
		c()
		delete(g.watching, uuid)
	}
	g.mu.Unlock()
	g.watch(uuid, res)
}

// watch follows domain uuid's channel unless it is followed already. res,
// unless nil, is the tracked job's result as just written.
func (g *guests) watch(uuid string, res *result.Result) {
	if _, ok := g.loadTrack(uuid); !ok {
		return
	}
	g.mu.Lock()
	if g.watching[uuid] != nil || g.ctx.Err() != nil {
		g.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(g.ctx)
	g.watching[uuid] = cancel
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		defer func() {
			g.mu.Lock()
			// only our own entry: a restart may have put a new one
			if g.watching[uuid] != nil && ctx.Err() == nil {
				delete(g.watching, uuid)
			}
			g.mu.Unlock()
			cancel()
		}()
		g.follow(ctx, uuid, res)
	}()
}

// follow holds the channel of a running domain until the domain stops or
// ctx ends, applying every report. known, unless nil, is the tracked job's
// result as just written (else it is read from its file).
func (g *guests) follow(ctx context.Context, uuid string, known *result.Result) {
	tr, ok := g.loadTrack(uuid)
	if !ok {
		return
	}
	var res result.Result
	if known != nil && known.ID == tr.JobID && known.State == result.State(tr.State) && known.DomainUUID == tr.UUID {
		res = *known
	} else if res, ok = g.result(tr); !ok {
		return
	}
	if res.Guest == nil {
		return
	}
	var deadline <-chan time.Time
	if res.Guest.Status == result.GuestPending {
		started := res.Guest.StartedAt
		if started == nil {
			// this start is the clock of guest_timeout (a resumed watch
			// keeps the one recorded)
			now := time.Now()
			if up, known := g.a.starts.Since(uuid); known {
				now = now.Add(-up)
			}
			if res.FinishedAt != nil && res.FinishedAt.After(now) {
				// the job changed the payload of a running domain: its
				// guest reports at its next boot, counted from the job
				now = *res.FinishedAt
			}
			now = now.UTC()
			started = &now
			g.update(tr, func(gs *result.Guest) {
				if gs.StartedAt == nil {
					gs.StartedAt = &now
				}
			}, result.GuestPending)
		}
		t := time.NewTimer(max(time.Until(started.Add(g.a.opt.GuestTimeout)), 0))
		defer t.Stop()
		deadline = t.C
	}
	for ctx.Err() == nil {
		path, live, err := g.channelPath(ctx, uuid)
		if libvirtx.IsNotFound(err) {
			// undefined while the agent was not looking
			g.gone(uuid)
			return
		}
		if err != nil || !live {
			if err != nil {
				g.a.log.Debug("guest channel not available", "uuid", uuid, "err", err)
			}
			return // stopped (a start event brings us back) or no channel
		}
		conn, err := g.dial(path)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-deadline:
				deadline = nil
				g.timedOut(tr)
			case <-time.After(g.retry):
			}
			continue
		}
		if g.read(ctx, tr, conn, &deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.retry):
		}
	}
}

// read reads report lines from conn until it closes (false) or ctx ends
// (true).
func (g *guests) read(ctx context.Context, tr guestTrack, conn net.Conn, deadline *<-chan time.Time) bool {
	defer conn.Close()
	lines := make(chan []byte)
	errc := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 0, 64<<10), guestreport.MaxLine+1)
		for sc.Scan() {
			b := append([]byte(nil), sc.Bytes()...)
			select {
			case lines <- b:
			case <-ctx.Done():
				return
			}
		}
		errc <- sc.Err()
	}()
	var last time.Time // when a report was last applied
	for {
		select {
		case <-ctx.Done():
			return true
		case <-*deadline:
			*deadline = nil
			g.timedOut(tr)
		case err := <-errc:
			if err != nil {
				g.a.log.Warn("reading the guest report channel", "domain", tr.Domain, "err", err)
			}
			return false
		case b := <-lines:
			if len(strings.TrimSpace(string(b))) == 0 {
				continue
			}
			if !last.IsZero() && time.Since(last) < g.gap {
				// a guest that floods the channel costs one result write
				// per minReportGap at most; the reporter sends one line
				// per boot
				continue
			}
			rep, err := guestreport.Parse(b)
			if err != nil {
				g.a.log.Warn("ignoring a line on the guest report channel", "domain", tr.Domain, "err", err)
				continue
			}
			last = time.Now()
			*deadline = nil
			g.reported(tr, rep)
			_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write([]byte(guestreport.Ack)); err != nil {
				g.a.log.Warn("acknowledging a guest report", "domain", tr.Domain, "err", err)
			}
		}
	}
}

// minReportGap is the shortest time between two reports applied from one
// connection.
const minReportGap = time.Second

// channelPath returns the host socket of uuid's report channel while the
// domain runs; live is false when it does not run or has no channel.
func (g *guests) channelPath(ctx context.Context, uuid string) (string, bool, error) {
	x, err := g.a.opt.Host.LiveXML(ctx, uuid)
	if err != nil {
		return "", false, err
	}
	doc, err := domxml.Read(x)
	if err != nil {
		return "", false, err
	}
	p, ok := doc.ChannelPath(guestreport.Channel)
	return p, ok, nil
}

// result reads the tracked job's result.
func (g *guests) result(tr guestTrack) (result.Result, bool) {
	res, err := g.a.spool.ReadResult(tr.JobID, result.State(tr.State))
	if err != nil || res.DomainUUID != tr.UUID {
		return res, false
	}
	return res, true
}

// reported applies a report to the tracked job's result.
func (g *guests) reported(tr guestTrack, rep guestreport.Report) {
	now := time.Now().UTC()
	var first bool
	res, ok := g.update(tr, func(gs *result.Guest) {
		first = gs.Reports == 0
		gs.Status = rep.Status
		gs.InstanceID = rep.InstanceID
		gs.Errors, gs.RecoverableErrors = rep.Errors, rep.RecoverableErrors
		gs.Datasource, gs.CloudInitVersion, gs.BootID = rep.Datasource, rep.CloudInitVersion, rep.BootID
		gs.UptimeSeconds = rep.UptimeSeconds
		gs.Reports++
		gs.ReportedAt = &now
		gs.Detail = ""
		if first && gs.StartedAt != nil {
			gs.Seconds = now.Sub(*gs.StartedAt).Seconds()
		}
	}, "")
	if !ok {
		return
	}
	gs := res.Guest
	typ := "guest_ready"
	if gs.Status != result.GuestDone && gs.Status != result.GuestDegraded || gs.InstanceIDMismatch {
		typ = "guest_failed"
	}
	if gs.Status == result.GuestRunning {
		typ = "guest_running"
	}
	secs := -1.0
	if first {
		secs = gs.Seconds
	}
	if result.GuestFinal(gs.Status) {
		g.a.met.GuestReport(gs.Status, secs)
	}
	attrs := []any{"id", res.ID, "domain", res.Domain, "status", gs.Status, "instance_id", gs.InstanceID, "reports", gs.Reports, "seconds", gs.Seconds}
	if gs.InstanceIDMismatch {
		attrs = append(attrs, "payload_instance_id", payloadIID(res))
	}
	if len(gs.Errors) > 0 {
		attrs = append(attrs, "errors", gs.Errors)
	}
	if typ == "guest_ready" {
		g.a.log.Info("guest reported", attrs...)
	} else {
		g.a.log.Warn("guest reported", attrs...)
	}
	g.a.events.publish(Event{Kind: "guest", Type: typ, ID: res.ID, Domain: res.Domain, UUID: res.DomainUUID, Error: errorOf(gs), Guest: gs})
}

func payloadIID(res result.Result) string {
	if res.Payload == nil {
		return ""
	}
	return res.Payload.InstanceID
}

func errorOf(gs *result.Guest) string {
	switch {
	case gs.InstanceIDMismatch:
		return "instance_id_mismatch"
	case gs.Status == result.GuestDone || gs.Status == result.GuestDegraded || gs.Status == result.GuestRunning:
		return ""
	}
	return gs.Status
}

// timedOut marks the tracked job's guest section timeout.
func (g *guests) timedOut(tr guestTrack) {
	res, ok := g.update(tr, func(gs *result.Guest) {
		if gs.Status == result.GuestPending {
			gs.Status = result.GuestTimeout
			gs.Detail = fmt.Sprintf("no report from the guest within guest_timeout (%s) of the domain's start", g.a.opt.GuestTimeout)
		}
	}, result.GuestPending)
	if !ok {
		return
	}
	g.a.met.GuestReport(result.GuestTimeout, -1)
	g.a.log.Warn("no guest report within guest_timeout", "id", res.ID, "domain", res.Domain, "guest_timeout", g.a.opt.GuestTimeout)
	g.a.events.publish(Event{Kind: "guest", Type: "guest_timeout", ID: res.ID, Domain: res.Domain, UUID: res.DomainUUID, Error: result.GuestTimeout, Guest: res.Guest})
}

// update changes the guest section of the tracked job's result with f,
// writes the result file and the registry, and wakes waiters. With only
// set, the change is made only while the status is only.
func (g *guests) update(tr guestTrack, f func(*result.Guest), only string) (result.Result, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	res, ok := g.result(tr)
	if !ok || res.Guest == nil {
		return res, false
	}
	if only != "" && res.Guest.Status != only {
		return res, false
	}
	gs := *res.Guest
	f(&gs)
	if gs.InstanceID != "" && res.Payload != nil && res.Payload.InstanceID != "" {
		gs.InstanceIDMismatch = gs.InstanceID != res.Payload.InstanceID
	}
	res.Guest = &gs
	if err := g.a.spool.ReplaceResult(res); err != nil {
		g.a.log.Error("writing the guest report into the job's result", "id", res.ID, "err", err)
		return res, false
	}
	g.a.reg.setGuest(res.ID, &gs)
	close(g.changed)
	g.changed = make(chan struct{})
	return res, true
}

// waitChange returns a channel closed at the next guest update.
func (g *guests) waitChange() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

// WaitGuest blocks until job id is final and, when its domain got the
// report channel, its guest section is final too, or ctx ends; it returns
// the latest state.
func (a *Agent) WaitGuest(ctx context.Context, id string) (result.Result, bool) {
	res, ok := a.Wait(ctx, id)
	for ok && ctx.Err() == nil && res.State == result.StateDone && res.Guest != nil && !result.GuestFinal(res.Guest.Status) {
		ch := a.guest.waitChange()
		if res, ok = a.Job(id); !ok || res.Guest == nil || result.GuestFinal(res.Guest.Status) {
			break
		}
		select {
		case <-ctx.Done():
		case <-ch:
		}
		res, ok = a.Job(id)
	}
	return res, ok
}
