// Package journal is a log/slog handler that writes to the systemd journal
// with its native protocol, so that every attribute of a log record becomes
// a journal field (journalctl -o json shows ID, DOMAIN, STATE, ...; filter
// with journalctl DOMAIN=web1).
//
// The agent uses it when systemd connected its standard error to the
// journal (the JOURNAL_STREAM variable names that stream; see
// systemd.exec(5)), which is how systemd asks services to switch to the
// native protocol.
package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// SocketPath is where journald receives native protocol datagrams.
const SocketPath = "/run/systemd/journal/socket"

// OnStream reports whether f is the stream that JOURNAL_STREAM
// ("device:inode") names: systemd connected it to the journal.
func OnStream(f *os.File) bool {
	dev, ino, ok := strings.Cut(os.Getenv("JOURNAL_STREAM"), ":")
	if !ok || f == nil {
		return false
	}
	st, err := f.Stat()
	if err != nil {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && strconv.FormatUint(uint64(sys.Dev), 10) == dev && strconv.FormatUint(sys.Ino, 10) == ino
}

// Handler sends each record as one journal entry: MESSAGE is the message
// followed by the attributes as key=value (what "journalctl -o cat" shows),
// PRIORITY follows the level, SYSLOG_IDENTIFIER is the identifier, and each
// attribute is also a field of its own: its key (groups joined with "_")
// upper-cased, characters other than A-Z, 0-9 and _ replaced by _.
// A record the journal does not take (too large, socket gone) is written
// to the fallback handler instead.
type Handler struct {
	shared   *conn
	level    slog.Leveler
	ident    string
	attrs    []slog.Attr // pre-formatted attributes (WithAttrs), keys already prefixed
	group    string      // open group prefix for later attributes, "a.b."
	fallback slog.Handler
}

type conn struct {
	mu   sync.Mutex
	c    *net.UnixConn
	addr *net.UnixAddr
}

// New returns a handler that sends to socket (SocketPath when empty), or an
// error when the socket cannot be reached. Records below level are dropped;
// fallback gets those the journal refuses.
func New(socket, ident string, level slog.Leveler, fallback slog.Handler) (*Handler, error) {
	if socket == "" {
		socket = SocketPath
	}
	addr := &net.UnixAddr{Name: socket, Net: "unixgram"}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("opening a datagram socket for the journal: %w", err)
	}
	if _, err := os.Stat(socket); err != nil {
		c.Close()
		return nil, fmt.Errorf("journal socket: %w", err)
	}
	return &Handler{shared: &conn{c: c, addr: addr}, level: level, ident: ident, fallback: fallback}, nil
}

// Enabled reports whether records at l are logged.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	min := slog.LevelInfo
	if h.level != nil {
		min = h.level.Level()
	}
	return l >= min
}

// WithAttrs returns a handler that adds attrs to every record.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range attrs {
		n.attrs = append(n.attrs, slog.Attr{Key: h.group + a.Key, Value: a.Value})
	}
	if h.fallback != nil {
		n.fallback = h.fallback.WithAttrs(attrs)
	}
	return &n
}

// WithGroup returns a handler that prefixes later attribute keys with name.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.group = h.group + name + "."
	if h.fallback != nil {
		n.fallback = h.fallback.WithGroup(name)
	}
	return &n
}

// Handle sends one record.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	var attrs []slog.Attr
	attrs = append(attrs, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		attrs = appendFlat(attrs, h.group, a)
		return true
	})
	var msg strings.Builder
	msg.WriteString(r.Message)
	for _, a := range attrs {
		msg.WriteByte(' ')
		msg.WriteString(a.Key)
		msg.WriteByte('=')
		msg.WriteString(textValue(a.Value.String()))
	}
	var b bytes.Buffer
	field(&b, "MESSAGE", msg.String())
	field(&b, "PRIORITY", strconv.Itoa(priority(r.Level)))
	if h.ident != "" {
		field(&b, "SYSLOG_IDENTIFIER", h.ident)
	}
	seen := map[string]bool{"MESSAGE": true, "PRIORITY": true, "SYSLOG_IDENTIFIER": true}
	for _, a := range attrs {
		name := FieldName(a.Key)
		if seen[name] {
			continue
		}
		seen[name] = true
		field(&b, name, a.Value.String())
	}
	h.shared.mu.Lock()
	_, err := h.shared.c.WriteToUnix(b.Bytes(), h.shared.addr)
	h.shared.mu.Unlock()
	if err != nil && h.fallback != nil {
		return h.fallback.Handle(ctx, r)
	}
	return err
}

// appendFlat flattens groups into dotted keys.
func appendFlat(dst []slog.Attr, prefix string, a slog.Attr) []slog.Attr {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			dst = appendFlat(dst, p, g)
		}
		return dst
	}
	if a.Key == "" {
		return dst
	}
	return append(dst, slog.Attr{Key: prefix + a.Key, Value: v})
}

// textValue quotes a value the way slog's text handler does when needed.
func textValue(s string) string {
	if s == "" || strings.ContainsAny(s, " =\"\n\t\r\\") {
		return strconv.Quote(s)
	}
	return s
}

// FieldName turns an attribute key into a journal field name: upper case,
// only A-Z, 0-9 and _, not starting with _ or a digit, at most 64 bytes.
func FieldName(key string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(key) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := strings.TrimLeft(b.String(), "_")
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		s = "F_" + s
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// field appends one field in the native protocol: "NAME=value\n", or for a
// value with a newline, NAME, "\n", its length as 64-bit little endian,
// the value and "\n".
func field(b *bytes.Buffer, name, value string) {
	b.WriteString(name)
	if !strings.Contains(value, "\n") {
		b.WriteByte('=')
		b.WriteString(value)
		b.WriteByte('\n')
		return
	}
	b.WriteByte('\n')
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(value)))
	b.Write(n[:])
	b.WriteString(value)
	b.WriteByte('\n')
}

// priority maps slog levels to syslog priorities.
func priority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	default:
		return 7
	}
}
