package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vmpayload/vmpayload/cmd/internal/cli"
)

// "vmpayload agent ARGS" is the agent's command line of earlier releases,
// kept for the units and scripts that use it: it runs the daemon binary,
// vmpayloadd, with the same arguments, in this process (exec: same PID, so
// systemd's MAINPID, sd_notify and signals reach the daemon).

func newAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "agent [vmpayloadd flags]",
		Short: "run the host agent (" + cli.DaemonName + ") with these arguments",
		Long: "run the host agent: exec " + cli.DaemonName + " with the same arguments. It is looked for next to this " +
			"binary, then as " + cli.DaemonPath + ", then in $PATH. \"" + cli.DaemonName + " --help\" lists its flags.",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Code(execDaemon(args, cmd.ErrOrStderr()))
		},
		ValidArgsFunction: completeDaemonFlags,
	}
}

// completeDaemonFlags completes the daemon's flag names (cobra parses none
// of "vmpayload agent"'s arguments, so it does not know them).
func completeDaemonFlags(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if !strings.HasPrefix(toComplete, "-") {
		return nil, cobra.ShellCompDirectiveDefault
	}
	var names []string
	cli.NewDaemonCommand(nil).Flags().VisitAll(func(f *pflag.Flag) {
		if n := "--" + f.Name; strings.HasPrefix(n, toComplete) {
			names = append(names, n+"\t"+f.Usage)
		}
	})
	return names, cobra.ShellCompDirectiveNoFileComp
}

// execDaemon replaces the process with the daemon run with args; it
// returns only when that fails.
func execDaemon(args []string, stderr io.Writer) int {
	exe, _ := os.Executable()
	path, err := findDaemon(exe, cli.DaemonPath, exec.LookPath)
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload agent: %v\n", err)
		return exitUsage
	}
	err = syscall.Exec(path, append([]string{path}, args...), os.Environ())
	fmt.Fprintf(stderr, "vmpayload agent: running %s: %v\n", path, err)
	return exitUsage
}

// findDaemon returns the daemon binary: the one next to exe (the running
// executable), else installed (its install path), else the one lookPath
// finds in $PATH.
func findDaemon(exe, installed string, lookPath func(string) (string, error)) (string, error) {
	var candidates []string
	if exe != "" {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), cli.DaemonName))
	}
	candidates = append(candidates, installed)
	for _, p := range candidates {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := lookPath(cli.DaemonName)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("the agent binary %s is not next to this one, not at %s and not in $PATH", cli.DaemonName, installed)
		}
		return "", err
	}
	return p, nil
}
