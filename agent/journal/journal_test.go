package journal

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The handler sends to the fixed path /run/systemd/journal/socket (the
// library's). The tests that need a journal therefore run in a child test
// process of their own in a new mount namespace with a tmpfs over /run,
// where they put either a stand-in journald (a listening datagram socket
// decoding the native protocol) or a real systemd-journald.

const nsEnv = "VMPAYLOAD_JOURNAL_TEST_NS"

func TestMain(m *testing.M) {
	if os.Getenv(nsEnv) == "1" {
		// the child: keep the mounts to this namespace, hide the host's /run
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			fmt.Fprintf(os.Stderr, "making / private: %v\n", err)
			os.Exit(3)
		}
		if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
			fmt.Fprintf(os.Stderr, "mounting a tmpfs on /run: %v\n", err)
			os.Exit(3)
		}
		if err := os.MkdirAll("/run/systemd/journal", 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	}
	os.Exit(m.Run())
}

// inNamespace reports whether the test runs in the child; when not, it runs
// the test in a child process in a new mount namespace (and a user
// namespace when not root), reports its outcome and returns false. The test
// is skipped where namespaces cannot be made.
func inNamespace(t *testing.T) bool {
	t.Helper()
	if os.Getenv(nsEnv) == "1" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), nsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	if os.Getuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		t.Logf("in a mount namespace:\n%s", out)
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		t.Skipf("no mount namespace with a /run of its own here: %s", out)
	case !errors.As(err, &exit):
		t.Skipf("cannot start a process in a new mount namespace: %v", err)
	default:
		t.Errorf("in a mount namespace: %v\n%s", err, out)
	}
	return false
}

// standIn listens on the journal's socket like journald and returns a
// function that reads the next entry, decoded by the native protocol's
// rules (an entry too large for a datagram comes as a file descriptor).
func standIn(t *testing.T) (*net.UnixConn, func() map[string]string) {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: "/run/systemd/journal/socket", Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, func() map[string]string {
		t.Helper()
		buf := make([]byte, 1<<17)
		oob := make([]byte, unix.CmsgSpace(4))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil {
			t.Fatalf("no entry: %v", err)
		}
		if n > 0 {
			return decode(t, buf[:n])
		}
		// an empty datagram carries the entry as a file
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			t.Fatalf("empty datagram without one control message: %v", err)
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			t.Fatalf("control message without one descriptor: %v", err)
		}
		f := os.NewFile(uintptr(fds[0]), "entry")
		defer f.Close()
		b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<30))
		if err != nil {
			t.Fatal(err)
		}
		return decode(t, b)
	}
}

func decode(t *testing.T, b []byte) map[string]string {
	t.Helper()
	m := map[string]string{}
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			t.Fatalf("entry does not end in a newline: %q", b)
		}
		line := string(b[:nl])
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
			b = b[nl+1:]
			continue
		}
		n := binary.LittleEndian.Uint64(b[nl+1 : nl+9])
		m[line] = string(b[nl+9 : nl+9+int(n)])
		if b[nl+9+int(n)] != '\n' {
			t.Fatalf("binary field %s does not end in a newline", line)
		}
		b = b[nl+10+int(n):]
	}
	return m
}

func TestHandler(t *testing.T) {
	if !inNamespace(t) {
		return
	}
	if _, err := New("x", nil, nil); err == nil {
		t.Error("New without a journal socket succeeded")
	}
	c, next := standIn(t)
	var fb bytes.Buffer
	h, err := New("vmpayload", slog.LevelInfo, slog.NewTextHandler(&fb, nil))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(h)
	log.Debug("dropped")
	log.With("id", "web1-1", "message", "not a MESSAGE").WithGroup("req").Info("job done",
		"domain", "web1", "duration_ms", 12, "err", "two\nlines", "9x", "y", "Domain", "second")
	e := next()
	want := map[string]string{
		"MESSAGE":           `job done id=web1-1 message="not a MESSAGE" req.domain=web1 req.duration_ms=12 req.err="two\nlines" req.9x=y req.Domain=second`,
		"PRIORITY":          "6",
		"SYSLOG_IDENTIFIER": "vmpayload",
		"ID":                "web1-1",
		"REQ_DOMAIN":        "web1",
		"REQ_DURATION_MS":   "12",
		"REQ_ERR":           "two\nlines",
		"REQ_9X":            "y",
	}
	for k, v := range want {
		if e[k] != v {
			t.Errorf("%s = %q, want %q", k, e[k], v)
		}
	}
	if len(e) != len(want) {
		t.Errorf("entry has %d fields, want %d: %v", len(e), len(want), e)
	}
	log.With(slog.Group("w", "x", 2)).Warn("w", slog.Group("g", "a", 1))
	if e := next(); e["PRIORITY"] != "4" || e["G_A"] != "1" || e["W_X"] != "2" || e["MESSAGE"] != "w w.x=2 g.a=1" {
		t.Errorf("warn entry %v", e)
	}
	log.Error("e")
	if e := next(); e["PRIORITY"] != "3" || e["MESSAGE"] != "e" {
		t.Errorf("error entry %v", e)
	}
	// an entry larger than a datagram arrives whole
	big := strings.Repeat("0123456789abcdef", 1<<14) // 256 KiB
	log.Info("big", "blob", big)
	if e := next(); e["BLOB"] != big || e["MESSAGE"] != "big blob="+big {
		t.Errorf("large entry: BLOB of %d bytes, MESSAGE of %d, want %d", len(e["BLOB"]), len(e["MESSAGE"]), len(big))
	}
	if fb.Len() != 0 {
		t.Errorf("the fallback got %q while the journal was there", fb.String())
	}
	// the journal gone: records go to the fallback
	c.Close()
	os.Remove("/run/systemd/journal/socket")
	log.Info("after", "k", "v")
	if !strings.Contains(fb.String(), "msg=after k=v") {
		t.Errorf("fallback got %q", fb.String())
	}
}

// TestHandlerJournald sends to a real systemd-journald and reads the entries
// back with journalctl.
func TestHandlerJournald(t *testing.T) {
	journald := ""
	for _, p := range []string{"/usr/lib/systemd/systemd-journald", "/lib/systemd/systemd-journald"} {
		if _, err := os.Stat(p); err == nil {
			journald = p
			break
		}
	}
	if _, err := exec.LookPath("journalctl"); journald == "" || err != nil {
		t.Skip("no systemd-journald and journalctl here")
	}
	if !inNamespace(t) {
		return
	}
	if err := os.MkdirAll("/run/log/journal", 0o755); err != nil {
		t.Fatal(err)
	}
	jd := exec.Command(journald)
	var jdOut bytes.Buffer
	jd.Stdout, jd.Stderr = &jdOut, &jdOut
	if err := jd.Start(); err != nil {
		t.Skipf("starting %s: %v", journald, err)
	}
	t.Cleanup(func() {
		jd.Process.Kill()
		jd.Wait()
	})
	var h *Handler
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if h, err = New("vmpayload-test", slog.LevelDebug, nil); err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Skipf("systemd-journald does not listen here: %v\n%s", err, jdOut.String())
		}
	}
	log := slog.New(h)
	big := strings.Repeat("x", 300<<10)
	log.With("id", "jd-1").Info("job done", "domain", "web1", "state", "done", "err", "two\nlines")
	log.With("id", "jd-2").Debug("large", "blob", big)

	var entries []map[string]any
	for start := time.Now(); len(entries) < 2; time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("journalctl shows %d of the 2 entries\n%s", len(entries), jdOut.String())
		}
		out, err := exec.Command("journalctl", "-D", "/run/log/journal", "-o", "json", "--all", "--no-pager",
			"SYSLOG_IDENTIFIER=vmpayload-test").Output()
		if err != nil {
			continue
		}
		entries = entries[:0]
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var e map[string]any
			if line != "" && json.Unmarshal([]byte(line), &e) == nil {
				entries = append(entries, e)
			}
		}
	}
	byID := map[string]map[string]any{}
	for _, e := range entries {
		id, _ := e["ID"].(string)
		byID[id] = e
	}
	want := map[string]any{"MESSAGE": `job done id=jd-1 domain=web1 state=done err="two\nlines"`, "PRIORITY": "6",
		"DOMAIN": "web1", "STATE": "done", "ERR": "two\nlines", "_TRANSPORT": "journal"}
	for k, v := range want {
		if byID["jd-1"][k] != v {
			t.Errorf("journald entry jd-1: %s = %v, want %v", k, byID["jd-1"][k], v)
		}
	}
	if byID["jd-2"]["BLOB"] != big || byID["jd-2"]["PRIORITY"] != "7" {
		t.Errorf("journald entry jd-2: BLOB of %d bytes, PRIORITY %v; want %d bytes, 7",
			len(fmt.Sprint(byID["jd-2"]["BLOB"])), byID["jd-2"]["PRIORITY"], len(big))
	}
}

func TestFieldName(t *testing.T) {
	for in, want := range map[string]string{"domain": "DOMAIN", "duration_ms": "DURATION_MS", "a.b-c": "A_B_C",
		"_x": "X", "1a": "F_1A", "": "F_", "__": "F_", strings.Repeat("a", 70): strings.Repeat("A", 64)} {
		if got := FieldName(in); got != want {
			t.Errorf("FieldName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOnStream(t *testing.T) {
	t.Setenv("JOURNAL_STREAM", "")
	if OnStream(os.Stderr) {
		t.Error("OnStream without JOURNAL_STREAM")
	}
	t.Setenv("JOURNAL_STREAM", devIno(t, os.Stderr))
	if !OnStream(os.Stderr) {
		t.Error("OnStream false for the named stream")
	}
	f, err := os.CreateTemp(t.TempDir(), "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if OnStream(f) {
		t.Error("OnStream true for a file other than stdout and stderr")
	}
	t.Setenv("JOURNAL_STREAM", devIno(t, f))
	if OnStream(os.Stderr) {
		t.Error("OnStream true for another stream")
	}
	t.Setenv("JOURNAL_STREAM", "garbage")
	if OnStream(os.Stderr) {
		t.Error("OnStream true for a malformed JOURNAL_STREAM")
	}
}

func devIno(t *testing.T, f *os.File) string {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	s := st.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", s.Dev, s.Ino)
}
