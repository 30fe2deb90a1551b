package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/job"
)

// --connect: the client commands reach a remote agent over ssh, or a local
// socket named by URI (agent/api/client's Connect; docs/remote.md).

// submitRetries is how many times a submission whose connection dropped
// before the answer is retried (each after looking the job up first).
const submitRetries = 3

// addConnectFlag defines --connect (repeatable) on cmd.
func addConnectFlag(cmd *cobra.Command, dst *[]string) {
	cmd.Flags().StringArrayVar(dst, "connect", nil, "the agent at `URI`: ssh://[user@]host[:port][?socket=PATH&command=PATH] (over your ssh) or unix:///PATH; default $"+client.ConnectEnv+", else the local socket. status takes it repeated")
	_ = cmd.RegisterFlagCompletionFunc("connect", func(_ *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return []string{"ssh://", "unix:///"}, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	})
}

// targets parses --connect, or VMPAYLOAD_CONNECT when no --connect is
// given; none means the local socket. A bad URI is a usage error naming it.
func (a agentFlags) targets(name string, stderr io.Writer) ([]client.Target, int) {
	uris := a.connect
	if len(uris) == 0 {
		if env := strings.TrimSpace(os.Getenv(client.ConnectEnv)); env != "" {
			uris = []string{env}
		}
	}
	if len(uris) > 0 && (a.socket != "" || a.spoolDir != "") {
		fmt.Fprintf(stderr, "vmpayload %s: --connect (or $%s) and --socket/--spool-dir exclude each other\n", name, client.ConnectEnv)
		return nil, exitUsage
	}
	var ts []client.Target
	for _, u := range uris {
		t, err := client.ParseURI(u)
		if err != nil {
			fmt.Fprintf(stderr, "vmpayload %s: %v\n", name, err)
			return nil, exitUsage
		}
		ts = append(ts, t)
	}
	return ts, exitOK
}

// retryable says whether a failed request may have reached the agent and
// can be asked again: a connection that dropped, not a host that could not
// be reached or refused the key.
func retryable(err error) bool {
	var re *client.RemoteError
	if errors.As(err, &re) {
		return re.Dropped
	}
	return true
}

// submitRemote submits a job to the agent at t. The job gets an id when it
// has none, so that a submission whose answer is lost (the connection
// dropped) is looked up before it is sent again: the agent never gets it
// twice, and the answer is the first submission's.
func submitRemote(ctx context.Context, name string, o *submitOptions, t client.Target, j *job.Job, data []byte,
	report func(io.Writer, []job.FieldError), stdout, stderr io.Writer) int {
	cl := client.Connect(t, client.Options{})
	defer cl.CloseIdleConnections()
	id := j.ID
	if id == "" {
		id = clientID()
		data = withID(data, id)
	}
	var ans client.Answer
	var status int
	var err error
	for attempt := 0; ; attempt++ {
		ans, status, err = cl.Submit(ctx, data)
		if attempt > 0 && status == http.StatusConflict {
			err, status = nil, 0 // our lost first submission: look it up
		} else if err == nil || status != 0 {
			break
		} else if !retryable(err) || attempt >= submitRetries || ctx.Err() != nil {
			fmt.Fprintf(stderr, "vmpayload %s: %v\n", name, err)
			return exitUsage
		}
		// The answer was lost: did the agent take the job?
		cl.CloseIdleConnections()
		res, st, lerr := cl.Job(ctx, id, client.JobQuery{})
		switch {
		case lerr == nil:
			fmt.Fprintf(stderr, "vmpayload %s: the connection to %s dropped before the answer; the agent has %s (%s): not submitted again\n",
				name, t.Name(), id, res.State)
			ans, status, err = client.Answer{ID: id, State: res.State}, http.StatusAccepted, nil
		case st == http.StatusNotFound:
			fmt.Fprintf(stderr, "vmpayload %s: the connection to %s dropped before the answer; the agent does not have %s: submitting again\n",
				name, t.Name(), id)
			continue
		case st == 0 && retryable(lerr) && attempt < submitRetries:
			continue
		default:
			fmt.Fprintf(stderr, "vmpayload %s: %v\n", name, lerr)
			return exitUsage
		}
		break
	}
	switch {
	case status == http.StatusBadRequest:
		report(stderr, ans.Errors)
		return exitInvalid
	case status != http.StatusAccepted:
		fmt.Fprintf(stderr, "vmpayload %s: %s answered %d: %s\n", name, t.Name(), status, ans.Error)
		if status == http.StatusForbidden {
			report(stderr, ans.Errors)
		}
		return exitUsage
	}
	fmt.Fprintf(stdout, "queued %s\n", ans.ID)
	if o.waitFor == "" {
		return exitOK
	}
	return waitAPI(ctx, cl, name, ans.ID, o.waitFor == "guest", stdout, stderr)
}

// clientID is a job id made by the client (the agent's pattern).
func clientID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "job-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

// withID returns the job document data (a JSON object without "id") with
// "id" set to id, the rest of it unchanged.
func withID(data []byte, id string) []byte {
	i := bytes.IndexByte(data, '{')
	if i < 0 {
		return data
	}
	rest := bytes.TrimLeft(data[i+1:], " \t\r\n")
	sep := ","
	if len(rest) > 0 && rest[0] == '}' {
		sep = ""
	}
	out := append([]byte{}, data[:i+1]...)
	out = append(out, fmt.Sprintf("%q:%q%s", "id", id, sep)...)
	return append(out, data[i+1:]...)
}

// hostStatus is one row of "status --connect A --connect B".
type hostStatus struct {
	Host   string          `json:"host"`
	URI    string          `json:"uri"`
	Health map[string]any  `json:"health,omitempty"`
	Jobs   []result.Result `json:"jobs,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// lastJobs is how many recent jobs a host's row shows.
const lastJobs = 3

// statusHosts asks every target for its health and recent jobs, in
// parallel, and prints one table (or JSON). A host that does not answer is
// a row saying why; the exit status is 0 all the same.
func statusHosts(ctx context.Context, targets []client.Target, asJSON bool, stdout io.Writer) int {
	rows := make([]hostStatus, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[i] = hostStatus{Host: t.Name(), URI: t.URI}
			cl := client.Connect(t, client.Options{})
			defer cl.CloseIdleConnections()
			_, h, err := cl.Health(ctx)
			if err != nil {
				rows[i].Error = err.Error()
				return
			}
			rows[i].Health = h
			jobs, err := cl.Jobs(ctx)
			if err != nil {
				rows[i].Error = err.Error()
				return
			}
			rows[i].Jobs = jobs
		}()
	}
	wg.Wait()
	if asJSON {
		printJSON(stdout, struct {
			Hosts []hostStatus `json:"hosts"`
		}{rows})
		return exitOK
	}
	fmt.Fprintf(stdout, "%-24s %-9s %-12s %6s %7s  %s\n", "HOST", "HEALTH", "LIBVIRT", "QUEUED", "RUNNING", "LAST JOBS")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(stdout, "%-24s %-9s %s\n", r.Host, "down", strings.ReplaceAll(r.Error, "\n", " "))
			continue
		}
		var last []string
		for i, j := range r.Jobs {
			if i == lastJobs {
				break
			}
			last = append(last, j.ID+" "+string(j.State))
		}
		if len(last) == 0 {
			last = []string{"-"}
		}
		fmt.Fprintf(stdout, "%-24s %-9v %-12v %6v %7v  %s\n", r.Host, r.Health["status"], r.Health["libvirt"],
			r.Health["queued"], r.Health["in_flight"], strings.Join(last, ", "))
	}
	return exitOK
}
