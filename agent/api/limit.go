package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/metrics"
)

// Defaults of the connection caps (agent.yaml max_connections,
// max_connections_per_uid, max_event_subscribers,
// max_event_subscribers_per_uid). See docs/reliability.md for the figures.
const (
	DefaultMaxConnections            = 1024
	DefaultMaxConnectionsPerUID      = 64
	DefaultMaxEventSubscribers       = 256
	DefaultMaxEventSubscribersPerUID = 16
	// DefaultFDReserve is how many file descriptors the caps leave free
	// below RLIMIT_NOFILE for everything else the agent opens (libvirt,
	// spool listings, payload builds, the journal) when FDReserve is 0.
	DefaultFDReserve = 256
)

// FDReserveFor returns the file descriptors to keep free for an agent with
// workers workers: a base for libvirt, the spool watcher and listings, the
// journal and the listener, and a share per concurrently built payload
// (docs/reliability.md has the measured peak).
func FDReserveFor(workers int) int { return 128 + 16*max(workers, 1) }

// unknownUID stands for a client whose credentials could not be read; it
// is never privileged.
const unknownUID = math.MaxUint32

// limiter counts what each uid holds of one resource (connections, event
// subscriptions) and refuses more than the caps: total in all, perUID for
// each uid but the privileged ones (root and the agent's own uid), and
// unprivileged uids together at most total-perUID, so that privileged
// clients always find perUID free.
type limiter struct {
	total, perUID int

	mu     sync.Mutex
	n      int // held in all
	others int // held by unprivileged uids
	by     map[uint32]int
}

// Refusal reasons: why the limiter said no.
const (
	refuseUID   = "uid"
	refuseTotal = "total"
)

func newLimiter(total, perUID int) *limiter {
	return &limiter{total: total, perUID: perUID, by: map[uint32]int{}}
}

// privileged reports whether uid is root or the agent's own uid: they are
// not held to the per-uid cap and have a reserve in the total.
func privileged(uid uint32) bool { return uid == 0 || uid == uint32(os.Geteuid()) }

// acquire takes one for uid, or returns why not (refuseUID, refuseTotal).
func (l *limiter) acquire(uid uint32) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n >= l.total {
		return refuseTotal
	}
	priv := privileged(uid)
	if !priv {
		if l.by[uid] >= l.perUID {
			return refuseUID
		}
		if l.others >= l.total-l.perUID {
			return refuseTotal
		}
		l.others++
	}
	l.n++
	l.by[uid]++
	return ""
}

// release gives back one that acquire gave uid.
func (l *limiter) release(uid uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if !privileged(uid) {
		l.others--
	}
	if l.by[uid]--; l.by[uid] <= 0 {
		delete(l.by, uid)
	}
}

// held returns how many are held in all.
func (l *limiter) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// fdLimit returns the process's RLIMIT_NOFILE soft limit, or 0 when it
// cannot be read or is unlimited.
func fdLimit() int {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur == unix.RLIM_INFINITY || r.Cur > math.MaxInt32 {
		return 0
	}
	return int(r.Cur)
}

// initLimits sets the caps from the Server's fields and the process's file
// descriptor limit: max_connections is lowered (with a warning) so that
// FDReserve descriptors stay free, and a spool listing or payload build
// never meets EMFILE because of clients.
func (s *Server) initLimits() {
	total, perUID := s.MaxConnections, s.MaxConnectionsPerUID
	if total <= 0 {
		total = DefaultMaxConnections
	}
	if perUID <= 0 {
		perUID = min(DefaultMaxConnectionsPerUID, total/3)
	}
	reserve := s.FDReserve
	if reserve <= 0 {
		reserve = DefaultFDReserve
	}
	if lim := fdLimit(); lim > 0 && total+reserve > lim {
		nt := max(lim-reserve, 3)
		s.log().Warn("max_connections lowered to keep file descriptors free below the open-file limit (raise LimitNOFILE or lower max_connections)",
			"max_connections", total, "lowered_to", nt, "open_file_limit", lim, "fd_reserve", reserve)
		total = nt
		perUID = max(min(perUID, total/3), 1)
	}
	subs, subsUID := s.MaxEventSubscribers, s.MaxEventSubscribersPerUID
	if subs <= 0 {
		subs = DefaultMaxEventSubscribers
	}
	if subsUID <= 0 {
		subsUID = min(DefaultMaxEventSubscribersPerUID, subs/3)
	}
	s.conns = newLimiter(total, max(perUID, 1))
	s.subs = newLimiter(subs, max(subsUID, 1))
	s.Metrics.SetConnections(func() (int, int) { return s.conns.held(), s.subs.held() })
}

// limitListener admits connections within the Server's caps. A connection
// over a cap is answered 503 with the reason and closed at once, without a
// goroutine or a read; only admitted ones reach the HTTP server.
type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid := peerUID(c)
		reason := l.s.conns.acquire(uid)
		if reason == "" {
			return &limitedConn{Conn: c, release: sync.OnceFunc(func() { l.s.conns.release(uid) })}, nil
		}
		l.s.refused(c, uid, reason)
	}
}

// peerUID reads the uid of a unix socket client (SO_PEERCRED) without
// looking up its name: the accept loop must stay cheap.
func peerUID(c net.Conn) uint32 {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return unknownUID
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return unknownUID
	}
	uid := uint32(unknownUID)
	_ = raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			uid = cred.Uid
		}
	})
	return uid
}

// refused answers a connection over a cap and closes it. The answer is
// small enough for the socket's send buffer, so the write does not wait
// for the client; the deadline only guards against the unexpected.
func (s *Server) refused(c net.Conn, uid uint32, reason string) {
	msg := s.refusal("connections", uid, reason, s.conns)
	s.Metrics.ConnectionRefused(refusedAs(reason, metrics.RefusedPerUID, metrics.RefusedTotal))
	s.warnRefused(uid, reason, "connection")
	body, _ := json.Marshal(client.Answer{Error: msg})
	body = append(body, '\n')
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	_ = c.Close()
}

// refusal is the message a client over a cap gets.
func (s *Server) refusal(what string, uid uint32, reason string, l *limiter) string {
	key := "max_event_subscribers"
	if what == "connections" {
		key = "max_connections"
	}
	if reason == refuseUID {
		return fmt.Sprintf("too many %s: uid %d already holds %d, the most %s_per_uid allows; close one and retry", what, uid, l.perUID, key)
	}
	return fmt.Sprintf("too many %s to the agent: %s %d reached (%d kept for root); retry later", what, key, l.total, l.perUID)
}

// warnRefused logs a refusal, at most one line per uid and reason every
// refusedLogEvery (a flood of refusals is counted in the metrics, not
// logged line by line).
func (s *Server) warnRefused(uid uint32, reason, what string) {
	k := strconv.FormatUint(uint64(uid), 10) + "/" + reason + "/" + what
	now := time.Now()
	s.refusedMu.Lock()
	if s.refusedLog == nil || len(s.refusedLog) > 1000 {
		s.refusedLog = map[string]time.Time{}
	}
	last, seen := s.refusedLog[k]
	if seen && now.Sub(last) < refusedLogEvery {
		s.refusedMu.Unlock()
		return
	}
	s.refusedLog[k] = now
	s.refusedMu.Unlock()
	s.log().Warn("API "+what+" refused: over a cap", "uid", uid, "cap", reason)
}

// refusedLogEvery spaces the log lines of refusals of one uid and cap.
const refusedLogEvery = time.Minute

// refusedAs is the metrics reason of a refusal: perUID for refuseUID, else
// total.
func refusedAs(reason, perUID, total string) string {
	if reason == refuseUID {
		return perUID
	}
	return total
}

// limitedConn gives its slot back when it is closed.
type limitedConn struct {
	net.Conn
	release func() // once only
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// NetConn returns the underlying connection (for SO_PEERCRED).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection, as the HTTP server does before
// closing one it answered with an error.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
