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

// Guest reports (docs/guest-report.md). A job that gave its domain the
// report channel finishes with a result whose guest section is pending. The
// agent then records, per domain, which job's result the guest's reports go
// to (a small file in the spool's guest/ directory, so that a restarted
// agent carries on), and while the domain runs it holds a connection to the
// channel's host socket, which QEMU keeps open across libvirtd restarts. Each
// report line is acknowledged and written into that job's result file
// (atomically); no report within guest_timeout of the start gives status
// timeout (a later report still replaces it).

// GuestDir is the spool subdirectory of the per-domain guest report state.
const GuestDir = "guest"

// DefaultGuestTimeout is guest_timeout's default.
const DefaultGuestTimeout = 15 * time.Minute

// guestTrack is the state file of one domain: which job's result its
// reports go to.
type guestTrack struct {
	JobID  string `json:"job_id"`
	State  string `json:"state"`
	Domain string `json:"domain"`
	UUID   string `json:"uuid"`
}

// guests follows the report channels of the agent's domains.
type guests struct {
	a   *Agent
	dir string
	// dial connects to a channel's host socket (net.Dial; tests replace it).
	dial func(path string) (net.Conn, error)
	// retry is the pause between connection attempts; gap the shortest
	// time between two reports applied from one connection (minReportGap).
	retry, gap time.Duration

	mu       sync.Mutex
	watching map[string]context.CancelFunc // by domain UUID
	// tracks holds the state files this agent wrote or read, by domain
	// UUID, so that following a domain does not read back what the agent
	// just wrote (issue 14); the files stay the record a restarted agent
	// reads.
	tracks map[string]guestTrack
	// files serialises the changes of one domain's state file with
	// tracks, by domain UUID: a file read, write or removal and the
	// matching change of tracks happen together. Taken before mu.
	files   map[string]*sync.Mutex
	changed chan struct{} // closed and replaced at each guest update
	ctx     context.Context
	wg      sync.WaitGroup
}

func newGuests(a *Agent) *guests {
	return &guests{a: a, dir: filepath.Join(a.spool.Root, GuestDir), retry: time.Second, gap: minReportGap,
		dial: func(p string) (net.Conn, error) {
			return net.DialTimeout("unix", p, 5*time.Second)
		},
		watching: map[string]context.CancelFunc{}, tracks: map[string]guestTrack{}, files: map[string]*sync.Mutex{}, changed: make(chan struct{}), ctx: context.Background()}
}

func (g *guests) timeout() time.Duration {
	if g.a.opt.GuestTimeout > 0 {
		return g.a.opt.GuestTimeout
	}
	return DefaultGuestTimeout
}

func (g *guests) trackPath(uuid string) string { return filepath.Join(g.dir, uuid+".json") }

// start resumes the watches of running domains with a state file (an agent
// restart); ctx ends them all.
func (g *guests) start(ctx context.Context) {
	g.mu.Lock()
	g.ctx = ctx
	g.mu.Unlock()
	ents, err := os.ReadDir(g.dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			g.a.log.Warn("reading the guest report state", "dir", g.dir, "err", err)
		}
		return
	}
	for _, e := range ents {
		uuid, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		g.watch(uuid, nil)
	}
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
	if res.Action == "detach" {
		g.forget(res.DomainUUID)
		return
	}
	if res.Guest == nil {
		// A payload without the report replaced one with it.
		g.forget(res.DomainUUID)
		return
	}
	tr := guestTrack{JobID: res.ID, State: string(res.State), Domain: res.Domain, UUID: res.DomainUUID}
	if err := g.saveTrack(tr); err != nil {
		g.a.log.Error("recording the guest report state; this job's guest report is not followed", "id", res.ID, "domain", res.Domain, "err", err)
		return
	}
	// res is the result just written: the watch starts from it instead
	// of reading the file back.
	g.restart(res.DomainUUID, &res)
}

// fileLock returns the lock of uuid's state file (see guests.files).
func (g *guests) fileLock(uuid string) *sync.Mutex {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.files[uuid]
	if l == nil {
		l = new(sync.Mutex)
		g.files[uuid] = l
	}
	return l
}

func (g *guests) saveTrack(tr guestTrack) error {
	if err := os.MkdirAll(g.dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(tr)
	if err != nil {
		return err
	}
	l := g.fileLock(tr.UUID)
	l.Lock()
	defer l.Unlock()
	if err := atomicfile.WriteFile(g.trackPath(tr.UUID), b, 0o600, -1); err != nil {
		return err
	}
	g.mu.Lock()
	g.tracks[tr.UUID] = tr
	g.mu.Unlock()
	return nil
}

// loadTrack returns domain uuid's state: as this agent last wrote or read
// it, else from its file.
func (g *guests) loadTrack(uuid string) (guestTrack, bool) {
	g.mu.Lock()
	tr, ok := g.tracks[uuid]
	g.mu.Unlock()
	if ok {
		return tr, true
	}
	l := g.fileLock(uuid)
	l.Lock()
	defer l.Unlock()
	g.mu.Lock()
	tr, ok = g.tracks[uuid] // written meanwhile
	g.mu.Unlock()
	if ok {
		return tr, true
	}
	b, err := os.ReadFile(g.trackPath(uuid))
	if err != nil {
		return tr, false
	}
	if err := json.Unmarshal(b, &tr); err != nil || tr.JobID == "" {
		g.a.log.Warn("ignoring a damaged guest report state file", "path", g.trackPath(uuid), "err", err)
		return guestTrack{}, false
	}
	g.mu.Lock()
	g.tracks[uuid] = tr
	g.mu.Unlock()
	return tr, true
}

// forget stops following domain uuid (detached, undefined).
func (g *guests) forget(uuid string) {
	l := g.fileLock(uuid)
	l.Lock()
	defer l.Unlock()
	g.mu.Lock()
	if c := g.watching[uuid]; c != nil {
		c()
		delete(g.watching, uuid)
	}
	delete(g.tracks, uuid)
	g.mu.Unlock()
	if err := os.Remove(g.trackPath(uuid)); err != nil && !errors.Is(err, os.ErrNotExist) {
		g.a.log.Warn("removing the guest report state", "uuid", uuid, "err", err)
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
		t := time.NewTimer(max(time.Until(started.Add(g.timeout())), 0))
		defer t.Stop()
		deadline = t.C
	}
	for ctx.Err() == nil {
		path, live, err := g.channelPath(ctx, uuid)
		if libvirtx.IsNotFound(err) {
			// undefined while the agent was not looking
			g.forget(uuid)
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
	p, ok, err := domxml.ChannelPath(x, guestreport.Channel)
	return p, ok, err
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
			gs.Detail = fmt.Sprintf("no report from the guest within guest_timeout (%s) of the domain's start", g.timeout())
		}
	}, result.GuestPending)
	if !ok {
		return
	}
	g.a.met.GuestReport(result.GuestTimeout, -1)
	g.a.log.Warn("no guest report within guest_timeout", "id", res.ID, "domain", res.Domain, "guest_timeout", g.timeout())
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
