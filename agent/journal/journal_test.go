package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listen is a stand-in journald: a datagram socket whose entries are
// decoded with the native protocol's rules.
func listen(t *testing.T) (string, func() map[string]string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "socket")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return path, func() map[string]string {
		t.Helper()
		buf := make([]byte, 1<<16)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _, err := c.ReadFromUnix(buf)
		if err != nil {
			t.Fatalf("no entry: %v", err)
		}
		return decode(t, buf[:n])
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
	path, next := listen(t)
	var fb bytes.Buffer
	h, err := New(path, "vmpayload", slog.LevelInfo, slog.NewTextHandler(&fb, nil))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(h)
	log.Debug("dropped")
	log.With("id", "web1-1").WithGroup("req").Info("job done", "domain", "web1", "duration_ms", 12, "err", "two\nlines", "9x", "y")
	e := next()
	want := map[string]string{
		"MESSAGE":           `job done id=web1-1 req.domain=web1 req.duration_ms=12 req.err="two\nlines" req.9x=y`,
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
	log.Warn("w", slog.Group("g", "a", 1))
	if e := next(); e["PRIORITY"] != "4" || e["G_A"] != "1" || e["MESSAGE"] != "w g.a=1" {
		t.Errorf("warn entry %v", e)
	}
	log.Error("e")
	if e := next(); e["PRIORITY"] != "3" {
		t.Errorf("error entry %v", e)
	}
	if fb.Len() != 0 {
		t.Errorf("the fallback got %q while the journal was there", fb.String())
	}
	// the journal gone: records go to the fallback
	os.Remove(path)
	log.Info("after", "k", "v")
	if !strings.Contains(fb.String(), "msg=after k=v") {
		t.Errorf("fallback got %q", fb.String())
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
	f, err := os.CreateTemp(t.TempDir(), "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Setenv("JOURNAL_STREAM", "")
	if OnStream(f) {
		t.Error("OnStream without JOURNAL_STREAM")
	}
	t.Setenv("JOURNAL_STREAM", devIno(t, f))
	if !OnStream(f) {
		t.Error("OnStream false for the named stream")
	}
	if OnStream(os.Stdin) {
		t.Error("OnStream true for another file")
	}
	if _, err := New(filepath.Join(t.TempDir(), "none"), "x", nil, nil); err == nil {
		t.Error("New with a missing socket succeeded")
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
