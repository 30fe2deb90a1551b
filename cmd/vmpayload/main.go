// Command vmpayload builds, checks and inspects cloud-init payload images,
// runs the libvirt hook and talks to the host agent. It is pure Go (no cgo,
// no libvirt): the agent is the other binary, vmpayloadd, which "vmpayload
// agent" runs. Run "vmpayload help" for the subcommands.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/vmpayload/vmpayload/cmd/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exit codes shared by the subcommands
const (
	exitOK      = cli.ExitOK
	exitInvalid = cli.ExitInvalid // the input is invalid (validate, build)
	exitUsage   = cli.ExitUsage   // bad flags or arguments, or an I/O problem
)

// subcommand makes one subcommand.
type subcommand struct {
	name string
	mk   func() *cobra.Command
}

// subcommands makes the subcommands by name. A slice, not a map: the
// compiler lays it out in the binary, where a map is built at every start.
var subcommands = []subcommand{
	{"validate", newValidateCmd}, {"build", newBuildCmd}, {"inspect", newInspectCmd}, {"recipe", newRecipeCmd},
	{"hook", newHookCmd}, {"submit", newSubmitCmd}, {"status", newStatusCmd}, {"run", newRunCmd},
	{"agent", newAgentCmd}, {"version", newVersionCmd}, {"dial-stdio", newDialStdioCmd},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	only := ""
	if len(args) > 0 {
		only = args[0]
	}
	return cli.Execute(newRoot(only), args, stdout, stderr)
}

// newRoot returns the command tree of vmpayload; when only names a
// subcommand, the tree has just that one (a process runs one command: the
// others' flags need not be made). Building the whole tree cost ~350 µs per
// start against ~6 µs (issue 33's measurement), about a sixth of a
// `vmpayload version` process, so the shortcut stays.
func newRoot(only string) *cobra.Command {
	root := &cobra.Command{
		Use:   "vmpayload",
		Short: "cloud-init payloads for libvirt domains",
		Long: "vmpayload " + version + " — cloud-init payloads for libvirt domains\n\n" +
			"The host agent is the other binary, vmpayloadd(8); \"vmpayload agent\" runs it.\n\n" +
			"Exit status: 0 on success; 1 when the input is invalid; 2 for bad flags or arguments, or an I/O problem.",
		// no subcommand: the help, and the usage error's exit status
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return cli.ExitCode(exitUsage)
		},
	}
	for _, sc := range subcommands {
		if sc.name == only {
			root.AddCommand(sc.mk())
			// the process runs sc: cobra's "completion" command (four
			// shells' long help texts formatted at every start) is not
			// the one called
			root.CompletionOptions.DisableDefaultCmd = true
			return root
		}
	}
	for _, sc := range subcommands {
		root.AddCommand(sc.mk())
	}
	return root
}

// posArgs returns a cobra argument check that prints the command's usage to
// stderr when the number of positional arguments is not between lo and hi
// (hi < 0: no limit), with the usage error's exit status.
func posArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || hi >= 0 && len(args) > hi {
			return usageError(cmd)
		}
		return nil
	}
}

// command makes a subcommand that takes from lo to hi positional arguments
// (posArgs), completed by complete (nil: none), and exits with the code run
// returns.
func command(use, short string, lo, hi int, complete cobra.CompletionFunc, run func(args []string, stdout, stderr io.Writer) int) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: posArgs(lo, hi), ValidArgsFunction: complete,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Code(run(args, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		}}
}

// usageError prints the command's usage to stderr and returns the usage
// error's exit status.
func usageError(cmd *cobra.Command) error {
	cmd.SetOut(cmd.ErrOrStderr())
	_ = cmd.Usage()
	return cli.ExitCode(exitUsage)
}

// readInput reads a file, or standard input for "-".
func readInput(name string, limit int64) ([]byte, error) {
	r := io.Reader(os.Stdin)
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return b, nil
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
