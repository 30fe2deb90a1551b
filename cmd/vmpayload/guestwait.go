package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
)

// waitMode is submit's --wait: "" (do not wait), "job" (the job's result;
// --wait alone) or "guest" (also the guest's provisioning report,
// docs/guest-report.md).
type waitMode string

func (w *waitMode) String() string { return string(*w) }

// Type names the value in the help.
func (w *waitMode) Type() string { return "job|guest" }

func (w *waitMode) Set(s string) error {
	switch s {
	case "guest", "job":
		*w = waitMode(s)
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want job, guest, true or false, got %q", s)
	}
	*w = ""
	if b {
		*w = "job"
	}
	return nil
}

// guestDone reports whether waiting for res is over under --wait=guest: a
// final job without a guest section (failed, or reporting off), or a final
// guest section.
func guestDone(res result.Result) bool {
	return res.State.Final() && (res.Guest == nil || result.GuestFinal(res.Guest.Status))
}

// guestExit is submit's exit status for a job waited for with --wait=guest:
// 0 when the guest reported done or degraded for the payload's instance-id
// (or the job has no guest section), else 1.
func guestExit(res result.Result) int {
	if res.State == result.StateFailed {
		return exitInvalid
	}
	if g := res.Guest; g != nil && (g.InstanceIDMismatch || g.Status != result.GuestDone && g.Status != result.GuestDegraded) {
		return exitInvalid
	}
	return exitOK
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress prints how a wait goes on stderr: every change of state as a
// line, and on a terminal a line updated in place while the guest has not
// reported yet.
type progress struct {
	w        io.Writer
	id       string
	guest    bool // waiting for the guest: a done job shows the guest's status
	tty      bool
	last     string
	live     bool // a line in place is shown
	started  time.Time
	lastLive time.Time
}

func (p *progress) show(res result.Result) {
	state := string(res.State)
	if p.guest && res.State == result.StateDone && res.Guest != nil {
		state = "done, guest " + res.Guest.Status
		if res.Guest.InstanceIDMismatch {
			state += " (instance-id mismatch: the guest did not take this payload)"
		}
	}
	if state != p.last {
		p.clear()
		fmt.Fprintf(p.w, "%s %s\n", p.id, state)
		p.last = state
		p.started = time.Now()
	}
	if p.tty && res.State == result.StateDone && res.Guest != nil && res.Guest.Status == result.GuestPending &&
		time.Since(p.lastLive) >= time.Second {
		fmt.Fprintf(p.w, "\r%s waiting for the guest's report: %s", p.id, time.Since(p.started).Round(time.Second))
		p.live, p.lastLive = true, time.Now()
	}
}

func (p *progress) clear() {
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
		p.live = false
	}
}

// waitAPI polls the agent until job id is final (with guest: until
// guestDone), showing progress on stderr, and prints the result. name
// prefixes its messages.
func waitAPI(ctx context.Context, cl *client.Client, name, id string, guest bool, stdout, stderr io.Writer) int {
	p := &progress{w: stderr, id: id, guest: guest, tty: guest && isTerminal(stderr)}
	drops := 0
	for {
		res, status, err := cl.Job(ctx, id, client.JobQuery{Wait: 2 * time.Second, Guest: guest})
		if err != nil && status == 0 && cl.Target().Scheme == "ssh" && retryable(err) && drops < submitRetries && ctx.Err() == nil {
			drops++ // a remote connection dropped: ask again on a new one
			cl.CloseIdleConnections()
			continue
		}
		if err != nil {
			p.clear()
			if ctx.Err() != nil {
				fmt.Fprintf(stderr, "vmpayload %s: timed out waiting for %s (last state %s)\n", name, id, p.last)
				return exitUsage
			}
			fmt.Fprintf(stderr, "vmpayload %s: asking for %s: %v\n", name, id, err)
			return exitUsage
		}
		p.show(res)
		switch {
		case !guest && res.State.Final():
			return printResult(stdout, res)
		case guest && guestDone(res):
			p.clear()
			printJSON(stdout, res)
			return guestExit(res)
		case res.State.Final():
			// the agent answers at once for a final job: pace the polls
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}
