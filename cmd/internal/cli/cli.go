// Package cli holds what the two binaries of vmpayload share on the command
// line: the exit codes, running a cobra command tree with them, the rewriting
// of single-dash long flags (-attach) that the command lines of earlier
// releases used into pflag's spelling (--attach), and the daemon's command
// definition (its flags come from agent/config), which the pure binary needs
// for the daemon's man page and completion.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes shared by the subcommands of both binaries.
const (
	ExitOK      = 0
	ExitInvalid = 1 // the input is invalid (validate, build)
	ExitUsage   = 2 // bad flags or arguments, or an I/O problem
)

// ExitCode is an error that carries a command's exit status through cobra's
// Execute. The command has already printed what the user needs to see.
type ExitCode int

// Error says which exit status the command asked for.
func (e ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Code returns nil for ExitOK, else the ExitCode error.
func Code(code int) error {
	if code == ExitOK {
		return nil
	}
	return ExitCode(code)
}

// annotationNotInterspersed marks a command whose flags end at the first
// positional argument (see NotInterspersed).
const annotationNotInterspersed = "vmpayload/not-interspersed"

// NotInterspersed makes the flags of cmd end at its first positional
// argument, as the standard flag package did, and tells Normalize so.
func NotInterspersed(cmd *cobra.Command) {
	cmd.Flags().SetInterspersed(false)
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationNotInterspersed] = "true"
}

// Execute runs root with args (after Normalize) and returns the exit code:
// the ExitCode a command returned, ExitOK, or ExitUsage for a flag, argument
// or unknown-command error, which it prints to stderr with a hint.
func Execute(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(Normalize(root, args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SilenceErrors = true
	root.SilenceUsage = true
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	var code ExitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	fmt.Fprintf(stderr, "Run \"%s --help\" for usage.\n", cmd.CommandPath())
	return ExitUsage
}

// Normalize rewrites the command lines that the standard flag package
// accepted into pflag's spelling, so that every command line of earlier
// releases still works: "-name" and "-name=value" become "--name" and
// "--name=value" (any name longer than one letter: pflag would read "-attach"
// as the letters a, t, t, ...), and "--o" becomes "-o" where o is only a
// one-letter shorthand. The value of a flag that takes one ("--runcmd -x")
// is left as it is, and so is everything after "--", after the first
// positional argument of a NotInterspersed command, and the arguments of a
// command that parses none (DisableFlagParsing: "vmpayload agent").
func Normalize(root *cobra.Command, args []string) []string {
	out := make([]string, 0, len(args))
	cmd, seekingSub := root, true
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || cmd.DisableFlagParsing {
			return append(out, args[i:]...)
		}
		if len(a) < 2 || a[0] != '-' { // a subcommand's name or a positional argument
			out = append(out, a)
			if sub := subcommand(cmd, a); seekingSub && sub != nil {
				cmd = sub
				continue
			}
			seekingSub = false
			if cmd.Annotations[annotationNotInterspersed] == "true" {
				return append(out, args[i+1:]...)
			}
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := lookup(cmd, name)
		switch double := a[1] == '-'; {
		case len(name) > 1 && !double: // -attach
			a = "-" + a
		case len(name) == 1 && double && f != nil && f.Name != name: // --o
			a = a[1:]
		}
		out = append(out, a)
		if f != nil && f.NoOptDefVal == "" && !hasValue && i+1 < len(args) { // the flag's value
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// lookup finds the flag of cmd, its own or inherited, called name or with
// the one-letter shorthand name.
func lookup(cmd *cobra.Command, name string) *pflag.Flag {
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.InheritedFlags()} {
		if f := fs.Lookup(name); f != nil {
			return f
		}
		if len(name) == 1 {
			if f := fs.ShorthandLookup(name); f != nil {
				return f
			}
		}
	}
	return nil
}

// subcommand returns the child of cmd called (or aliased) name.
func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}
