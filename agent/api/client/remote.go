package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Remote agents (docs/remote.md). A connection URI says where the agent is:
//
//	unix:///run/vmpayload/agent.sock       the local socket
//	ssh://[user@]host[:port][?socket=PATH&command=PATH]
//
// Over ssh the client runs the user's own ssh, which runs "vmpayload
// dial-stdio" on the host, and speaks the same HTTP API over the pipe.

// ConnectEnv is the environment variable that gives the connection URI when
// no --connect flag does.
const ConnectEnv = "VMPAYLOAD_CONNECT"

// SSHCommandEnv, when set, is the ssh command line (split on blanks, no
// shell), as GIT_SSH_COMMAND is git's: e.g. "ssh -F /path/ssh_config".
const SSHCommandEnv = "VMPAYLOAD_SSH_COMMAND"

// DefaultConnectTimeout is ssh's ConnectTimeout.
const DefaultConnectTimeout = 10 * time.Second

// Target is a parsed connection URI.
type Target struct {
	URI    string // as given
	Scheme string // "unix" or "ssh"
	// Socket is the agent socket: the local path (unix), or the path on
	// the far side (ssh, ?socket=; empty: what the host's agent.yaml names).
	Socket string
	// User, Host and Port are the ssh destination (Port "" = ssh's default).
	User, Host, Port string
	// Command is the vmpayload binary on the host (?command=; default
	// "vmpayload" on the remote PATH).
	Command string
}

// Name is how messages name the target: the host for ssh (with the user
// and port when given), the socket for unix.
func (t Target) Name() string {
	if t.Scheme == "unix" {
		return t.Socket
	}
	n := t.Host
	if t.User != "" {
		n = t.User + "@" + n
	}
	if t.Port != "" {
		n += ":" + t.Port
	}
	return n
}

// ParseURI parses a connection URI. Every error names the URI and says what
// is wrong with it.
func ParseURI(s string) (Target, error) {
	bad := func(format string, a ...any) (Target, error) {
		return Target{}, fmt.Errorf("connection URI %q: %s", s, fmt.Sprintf(format, a...))
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad("%v", err)
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return bad("a fragment (#...) is not allowed")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("bad query: %v", err)
	}
	t := Target{URI: s, Scheme: u.Scheme}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || u.User != nil {
			return bad("a unix URI names no host (want unix:///absolute/path)")
		}
		if !path.IsAbs(u.Path) || u.Path != path.Clean(u.Path) {
			return bad("the socket path %q is not a clean absolute path (want unix:///absolute/path)", u.Path)
		}
		for k := range q {
			return bad("unknown query key %q (a unix URI takes none)", k)
		}
		t.Socket = u.Path
		return t, nil
	case "ssh":
	case "":
		return bad("no scheme (want ssh://[user@]host[:port] or unix:///path)")
	default:
		return bad("unknown scheme %q (want ssh://[user@]host[:port] or unix:///path)", u.Scheme)
	}
	if u.Opaque != "" {
		return bad("want ssh://[user@]host[:port]")
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			return bad("a password in the URI is not allowed (ssh uses your keys or agent)")
		}
		t.User = u.User.Username()
		if t.User == "" || strings.HasPrefix(t.User, "-") {
			return bad("bad user name %q", t.User)
		}
	}
	t.Host, t.Port = u.Hostname(), u.Port()
	if t.Host == "" {
		return bad("the host is missing (want ssh://[user@]host[:port])")
	}
	if strings.HasPrefix(t.Host, "-") || strings.ContainsAny(t.Host, " \t\n'\"\\;&|$`") {
		return bad("bad host name %q", t.Host)
	}
	if strings.HasSuffix(u.Host, ":") && t.Port == "" {
		return bad("the port is empty")
	}
	if t.Port != "" {
		if p, err := strconv.Atoi(t.Port); err != nil || p < 1 || p > 65535 {
			return bad("bad port %q (want 1-65535)", t.Port)
		}
	}
	if u.Path != "" && u.Path != "/" {
		return bad("unexpected path %q (the agent socket goes in ?socket=PATH)", u.Path)
	}
	for k, v := range q {
		if len(v) != 1 {
			return bad("query key %q given %d times", k, len(v))
		}
		switch k {
		case "socket":
			if !path.IsAbs(v[0]) {
				return bad("socket=%q is not an absolute path", v[0])
			}
			t.Socket = v[0]
		case "command":
			if v[0] == "" {
				return bad("command= is empty")
			}
			t.Command = v[0]
		default:
			return bad("unknown query key %q (ssh URIs take socket= and command=)", k)
		}
	}
	return t, nil
}

// Options tune a remote client.
type Options struct {
	// ConnectTimeout is ssh's ConnectTimeout (DefaultConnectTimeout if 0).
	ConnectTimeout time.Duration
}

// Connect returns a client for target t: the local socket for unix, an ssh
// pipe for ssh (one ssh process per connection; the transport keeps a
// connection alive between requests).
func Connect(t Target, o Options) *Client {
	if t.Scheme == "unix" {
		c := New(t.Socket)
		c.target = t
		return c
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialSSH(t, o)
		},
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{target: t, http: &http.Client{Transport: tr}}
}

// Target is where the client connects (its zero value for New's clients).
func (c *Client) Target() Target { return c.target }

// SSHArgs returns the command line that reaches t's agent: the ssh command
// (VMPAYLOAD_SSH_COMMAND or "ssh") with BatchMode and ConnectTimeout, the
// destination, and the remote "vmpayload dial-stdio" command, whose words
// are quoted for the remote shell.
func SSHArgs(t Target, timeout time.Duration) []string {
	args := []string{"ssh"}
	if env := strings.Fields(os.Getenv(SSHCommandEnv)); len(env) > 0 {
		args = env
	}
	secs := int(timeout.Round(time.Second) / time.Second)
	args = append(args, "-o", "BatchMode=yes", "-o", "ConnectTimeout="+strconv.Itoa(max(secs, 1)))
	if t.Port != "" {
		args = append(args, "-p", t.Port)
	}
	if t.User != "" {
		args = append(args, "-l", t.User)
	}
	command := t.Command
	if command == "" {
		command = "vmpayload"
	}
	remote := []string{shellQuote(command), "dial-stdio"}
	if t.Socket != "" {
		remote = append(remote, "--socket", shellQuote(t.Socket))
	}
	return append(args, "--", t.Host, strings.Join(remote, " "))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// RemoteError is a failure to reach a remote agent: ssh could not connect,
// was refused, or the host could not run vmpayload dial-stdio. Cause is
// ssh's (or the remote command's) last line of standard error.
type RemoteError struct {
	Target Target
	Cause  string
	// Dropped: the connection closed after the request was sent but
	// before any answer, with no error from ssh (a retry may find the
	// request done).
	Dropped bool
}

func (e *RemoteError) Error() string { return e.Target.Name() + ": " + e.Cause }

// sshConn is a net.Conn over the standard input and output of an ssh
// process.
type sshConn struct {
	t       Target
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  io.ReadCloser
	stderr  *syncBuffer
	exited  chan struct{}
	waitErr error
	got     bool // read at least one byte
	mu      sync.Mutex
	closed  bool
}

func dialSSH(t Target, o Options) (net.Conn, error) {
	args := SSHArgs(t, o.ConnectTimeout)
	cmd := exec.Command(args[0], args[1:]...)
	c := &sshConn{t: t, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = c.stderr
	// its own process group: a ^C on the terminal reaches vmpayload, which
	// closes the connection, not ssh first
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if c.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, &RemoteError{Target: t, Cause: fmt.Sprintf("running %s: %v", args[0], err)}
	}
	go func() { c.waitErr = cmd.Wait(); close(c.exited) }()
	return c, nil
}

// failure waits (briefly) for ssh to exit and describes why the pipe
// ended.
func (c *sshConn) failure(err error) error {
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
	}
	line := lastLine(c.stderr.String())
	code := -1
	select {
	case <-c.exited:
		if c.cmd.ProcessState != nil {
			code = c.cmd.ProcessState.ExitCode()
		}
	default:
	}
	dropped := strings.Contains(line, "closed by remote host") || strings.Contains(line, "Broken pipe") ||
		strings.Contains(line, "Connection reset")
	switch {
	case dropped:
		return &RemoteError{Target: c.t, Cause: line, Dropped: true}
	case line != "" && code == 127:
		return &RemoteError{Target: c.t, Cause: line + " (is vmpayload installed there? ?command=PATH names it)"}
	case line != "":
		return &RemoteError{Target: c.t, Cause: line}
	case code > 0:
		return &RemoteError{Target: c.t, Cause: fmt.Sprintf("ssh exited with status %d", code)}
	case !c.got:
		return &RemoteError{Target: c.t, Cause: "the connection closed before the agent answered", Dropped: true}
	}
	return err
}

func (c *sshConn) Read(p []byte) (int, error) {
	n, err := c.stdout.Read(p)
	if n > 0 {
		c.got = true
	}
	if err != nil && n == 0 && !c.isClosed() {
		if errors.Is(err, io.EOF) && c.got {
			return 0, io.EOF // the agent closed a connection it had answered on
		}
		return 0, c.failure(err)
	}
	return n, err
}

func (c *sshConn) Write(p []byte) (int, error) {
	n, err := c.stdin.Write(p)
	if err != nil && !c.isClosed() {
		return n, c.failure(err)
	}
	return n, err
}

func (c *sshConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close ends ssh's input (the remote dial-stdio half-closes the agent's
// socket and exits) and waits a little for ssh, then kills it.
func (c *sshConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	_ = c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(2 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	return nil
}

func (c *sshConn) LocalAddr() net.Addr                { return pipeAddr(c.t.URI) }
func (c *sshConn) RemoteAddr() net.Addr               { return pipeAddr(c.t.URI) }
func (c *sshConn) SetDeadline(t time.Time) error      { return nil }
func (c *sshConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *sshConn) SetWriteDeadline(t time.Time) error { return nil }

type pipeAddr string

func (a pipeAddr) Network() string { return "ssh" }
func (a pipeAddr) String() string  { return string(a) }

// syncBuffer is a bounded buffer written by exec's stderr copier.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() < 64<<10 {
		s.b.Write(p)
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lastLine is the last non-empty line of s, trimmed.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:])
}
