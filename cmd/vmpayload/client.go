package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

func newSubmitCmd() *cobra.Command {
	var o submitOptions
	cmd := command("submit JOB.json|-", "hand a job to the agent (socket API; falls back to the spool directory)", 1, 1, cobra.FixedCompletions([]string{"json"}, cobra.ShellCompDirectiveFilterFileExt),
		func(args []string, stdout, stderr io.Writer) int { return runSubmit(&o, args[0], stdout, stderr) })
	o.add(cmd)
	return cmd
}

func newStatusCmd() *cobra.Command {
	var at agentFlags
	var asJSON bool
	cmd := command("status [ID]", "show a job's result, or the agent's recent jobs", 0, 1,
		func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			// (cobra parses the flags twice when it completes: a
			// repeatable flag's values come twice)
			if ts, code := at.targets("status", io.Discard); code == exitOK && len(ts) > 0 {
				return completeJobIDs(client.Connect(ts[0], client.Options{ConnectTimeout: completeTimeout})), cobra.ShellCompDirectiveNoFileComp
			}
			return completeJobIDs(client.New(at.resolved().socket)), cobra.ShellCompDirectiveNoFileComp
		},
		func(args []string, stdout, stderr io.Writer) int { return runStatus(at, asJSON, args, stdout, stderr) })
	at.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// agentFlags say where the agent is: its socket, and the spool directory
// used when no agent answers there; or connection URIs (remote.go).
type agentFlags struct {
	socket, spoolDir string
	connect          []string
}

// add defines --socket, --spool-dir and --connect on cmd.
func (a *agentFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.socket, "socket", "", "agent socket `PATH` (default from /etc/vmpayload/agent.yaml)")
	cmd.Flags().StringVar(&a.spoolDir, "spool-dir", "", "spool `DIR` used when the socket is unreachable (default from /etc/vmpayload/agent.yaml)")
	_ = cmd.MarkFlagDirname("spool-dir")
	addConnectFlag(cmd, &a.connect)
}

// resolved fills in what the flags left empty from the agent's
// configuration.
func (a agentFlags) resolved() agentFlags {
	d := agentConfig()
	a.socket, a.spoolDir = cmp.Or(a.socket, d.Socket), cmp.Or(a.spoolDir, d.SpoolDir)
	return a
}

// submitOptions are the flags that say how a job reaches the agent and
// whether to wait for it; submit and run share them.
type submitOptions struct {
	agentFlags
	waitFor waitMode // "" (no wait), "job" or "guest"
	timeout time.Duration
}

// add defines the submission flags on cmd.
func (o *submitOptions) add(cmd *cobra.Command) {
	o.agentFlags.add(cmd)
	fs := cmd.Flags()
	fs.Var(&o.waitFor, "wait", "wait for the result and print it; exit 1 if the job failed. --wait=guest waits for the guest's provisioning report too; exit 1 unless it is done or degraded")
	fs.Lookup("wait").NoOptDefVal = "job" // --wait alone
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long --wait waits")
	_ = cmd.RegisterFlagCompletionFunc("wait", cobra.FixedCompletions([]string{"job", "guest"}, cobra.ShellCompDirectiveNoFileComp))
}

func runSubmit(o *submitOptions, name string, stdout, stderr io.Writer) int {
	data, err := readInput(name, job.MaxJobBytes)
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload submit: %v\n", err)
		return exitUsage
	}
	// Validate locally first: the same checks the agent makes.
	j, _, rep := payload.Check(data, payload.CheckOptions{Agent: true})
	if !rep.OK() {
		printReport(stderr, rep.Errors)
		return exitInvalid
	}
	return submitJob("submit", o, j, data, printReport, stdout, stderr)
}

// submitJob hands a validated job document (data, decoded as j) to the
// agent's socket, or to the spool when no agent answers there, and with
// o.wait waits for its result. report prints the agent's validation errors.
// It returns the command's exit code; name prefixes its messages.
func submitJob(name string, o *submitOptions, j *job.Job, data []byte, report func(io.Writer, []job.FieldError),
	stdout, stderr io.Writer) int {
	targets, code := o.targets(name, stderr)
	if code != exitOK {
		return code
	}
	if len(targets) > 1 {
		fmt.Fprintf(stderr, "vmpayload %s: one --connect at a time (got %d)\n", name, len(targets))
		return exitUsage
	}
	at := o.resolved()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if len(targets) == 1 {
		return submitRemote(ctx, name, o, targets[0], j, data, report, stdout, stderr)
	}
	cl := client.New(at.socket)
	ans, status, err := cl.Submit(ctx, data)
	if err != nil && status == 0 {
		// No agent on the socket: use the spool, which the agent reads at start.
		return submitSpool(ctx, name, at.spoolDir, j, data, o.waitFor, stdout, stderr, err)
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "vmpayload %s: %v\n", name, err)
		return exitUsage
	case status == http.StatusBadRequest:
		report(stderr, ans.Errors)
		return exitInvalid
	case status != http.StatusAccepted:
		fmt.Fprintf(stderr, "vmpayload %s: the agent answered %d: %s\n", name, status, ans.Error)
		return exitUsage
	}
	fmt.Fprintf(stdout, "queued %s\n", ans.ID)
	if o.waitFor == "" {
		return exitOK
	}
	return waitAPI(ctx, cl, name, ans.ID, o.waitFor == "guest", stdout, stderr)
}

func submitSpool(ctx context.Context, name, dir string, j *job.Job, data []byte, waitFor waitMode, stdout, stderr io.Writer, why error) int {
	sp := &spool.Spool{Root: dir}
	id := cmp.Or(j.ID, fmt.Sprintf("%s-%d", name, time.Now().UnixNano()))
	if err := sp.Put(id, data); err != nil {
		fmt.Fprintf(stderr, "vmpayload %s: the agent socket is unreachable (%v) and writing to the spool failed: %v\n", name, why, err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "queued %s in %s (agent socket unreachable)\n", id, filepath.Join(dir, spool.Incoming))
	if waitFor == "" {
		return exitOK
	}
	for {
		if res, ok := sp.Lookup(id); ok && waitFor != "guest" {
			return printResult(stdout, res)
		} else if ok && guestDone(res) {
			printJSON(stdout, res)
			return guestExit(res)
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "vmpayload %s: timed out waiting for %s\n", name, id)
			return exitUsage
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func printResult(w io.Writer, res result.Result) int {
	printJSON(w, res)
	if res.State == result.StateFailed {
		return exitInvalid
	}
	return exitOK
}

func runStatus(at agentFlags, asJSON bool, pos []string, stdout, stderr io.Writer) int {
	targets, code := at.targets("status", stderr)
	if code != exitOK {
		return code
	}
	at = at.resolved()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(targets) > 1 {
		if len(pos) == 1 {
			fmt.Fprintf(stderr, "vmpayload status: a job id takes one --connect (got %d)\n", len(targets))
			return exitUsage
		}
		return statusHosts(ctx, targets, asJSON, stdout)
	}
	cl := client.New(at.socket)
	if len(targets) == 1 {
		cl = client.Connect(targets[0], client.Options{})
		defer cl.CloseIdleConnections()
	}
	if len(pos) == 1 {
		res, status, err := cl.Job(ctx, pos[0], client.JobQuery{})
		if err != nil && status == 0 && len(targets) == 0 {
			r, ok := (&spool.Spool{Root: at.spoolDir}).Lookup(pos[0])
			if !ok {
				fmt.Fprintf(stderr, "vmpayload status: agent unreachable (%v) and no result for %q in %s\n", err, pos[0], at.spoolDir)
				return exitInvalid
			}
			res, status, err = r, http.StatusOK, nil
		}
		if status == http.StatusNotFound {
			fmt.Fprintf(stderr, "vmpayload status: no job %q\n", pos[0])
			return exitInvalid
		}
		if err != nil {
			fmt.Fprintf(stderr, "vmpayload status: %v\n", err)
			return exitUsage
		}
		return printResult(stdout, res)
	}
	jobs, err := cl.Jobs(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload status: %v\n", err)
		return exitUsage
	}
	if asJSON {
		printJSON(stdout, struct {
			Jobs []result.Result `json:"jobs"`
		}{jobs})
		return exitOK
	}
	fmt.Fprintf(stdout, "%-40s %-8s %-24s %s\n", "ID", "STATE", "DOMAIN", "DETAIL")
	for _, r := range jobs {
		detail := ""
		if r.Error != nil {
			detail = r.Error.Code + ": " + r.Error.Message
		} else if r.Payload != nil {
			detail = r.Payload.Path
		}
		fmt.Fprintf(stdout, "%-40s %-8s %-24s %s\n", r.ID, r.State, r.Domain, detail)
	}
	return exitOK
}
