// Package journal is a log/slog handler that writes to the systemd journal
// with its native protocol, so that every attribute of a log record becomes
// a journal field (journalctl -o json shows ID, DOMAIN, STATE, ...; filter
// with journalctl DOMAIN=web1).
//
// The protocol itself (the datagram socket at /run/systemd/journal/socket,
// the field encoding, an entry too large for a datagram passed as an
// unlinked file in /dev/shm, which the unit's PrivateDevices=yes keeps) is
// github.com/coreos/go-systemd/v22/journal; this package maps slog records
// onto journal fields.
//
// The agent uses it when systemd connected its standard error to the
// journal (the JOURNAL_STREAM variable names that stream; see
// systemd.exec(5)), which is how systemd asks services to switch to the
// native protocol.
package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	sdjournal "github.com/coreos/go-systemd/v22/journal"
)

// OnStream reports whether f is the process's standard error or output and
// JOURNAL_STREAM ("device:inode") names it: systemd connected it to the
// journal. A malformed JOURNAL_STREAM counts as no journal.
func OnStream(f *os.File) bool {
	var on bool
	var err error
	switch f {
	case os.Stderr:
		on, err = sdjournal.StderrIsJournalStream()
	case os.Stdout:
		on, err = sdjournal.StdoutIsJournalStream()
	}
	return on && err == nil
}

// Handler sends each record as one journal entry: MESSAGE is the message
// followed by the attributes as key=value (what "journalctl -o cat" shows),
// PRIORITY follows the level, SYSLOG_IDENTIFIER is the identifier, and each
// attribute is also a field of its own: its key (groups joined with "_")
// upper-cased, characters other than A-Z, 0-9 and _ replaced by _ (see
// FieldName); when two attributes map to one name, the first wins.
// A record the journal does not take (socket gone, entry refused) is
// written to the fallback handler instead.
type Handler struct {
	level    slog.Leveler
	ident    string
	attrs    []slog.Attr // attributes from WithAttrs, resolved, keys already prefixed
	group    string      // open group prefix for later attributes, "a.b."
	fallback slog.Handler
}

// New returns a handler that sends to the journal's socket
// (/run/systemd/journal/socket), or an error when that socket does not
// take connections. Records below level are dropped; fallback, when not
// nil, gets those the journal refuses.
func New(ident string, level slog.Leveler, fallback slog.Handler) (*Handler, error) {
	if !sdjournal.Enabled() {
		return nil, errors.New("journal: no journald listening on /run/systemd/journal/socket")
	}
	return &Handler{level: level, ident: ident, fallback: fallback}, nil
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
		n.attrs = appendFlat(n.attrs, h.group, a)
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

// Handle sends one record; when the journal refuses it, the fallback
// handles it and Handle returns the fallback's result.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	attrs := append([]slog.Attr(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		attrs = appendFlat(attrs, h.group, a)
		return true
	})
	var msg strings.Builder
	msg.WriteString(r.Message)
	fields := map[string]string{}
	if h.ident != "" {
		fields["SYSLOG_IDENTIFIER"] = h.ident
	}
	for _, a := range attrs {
		v := a.Value.String()
		fmt.Fprintf(&msg, " %s=%s", a.Key, textValue(v))
		name := FieldName(a.Key)
		if _, taken := fields[name]; taken || name == "MESSAGE" || name == "PRIORITY" {
			continue
		}
		fields[name] = v
	}
	err := sdjournal.Send(msg.String(), priority(r.Level), fields)
	if err != nil && h.fallback != nil {
		return h.fallback.Handle(ctx, r)
	}
	return err
}

// appendFlat flattens groups into dotted keys and resolves values.
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

// priority maps slog levels to syslog priorities.
func priority(l slog.Level) sdjournal.Priority {
	switch {
	case l >= slog.LevelError:
		return sdjournal.PriErr
	case l >= slog.LevelWarn:
		return sdjournal.PriWarning
	case l >= slog.LevelInfo:
		return sdjournal.PriInfo
	default:
		return sdjournal.PriDebug
	}
}
