// Command vmpayload builds cloud-init payload images and runs the vmpayload
// host agent. Run "vmpayload help" for the subcommands.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	// first: keeps libvirt out of the offline subcommands (issue 14)
	_ "github.com/vmpayload/vmpayload/cmd/vmpayload/internal/libvirtgate"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand of the binary.
type command struct {
	name    string
	usage   string // arguments after the name
	summary string
	run     func(c command, args []string, stdout, stderr io.Writer) int
}

// exit codes shared by the subcommands
const (
	exitOK      = 0
	exitInvalid = 1 // the input is invalid (validate, build)
	exitUsage   = 2 // bad flags or arguments, or an I/O problem
)

var commands []command

func register(c command) { commands = append(commands, c) }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			for _, c := range commands {
				if c.name == args[1] {
					return c.run(c, []string{"-h"}, stdout, stderr)
				}
			}
		}
		printUsage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(c, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "vmpayload: unknown command %q\n\n", args[0])
	printUsage(stderr)
	return exitUsage
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "vmpayload %s — cloud-init payloads for libvirt domains\n\nUsage:\n  vmpayload <command> [flags] [args]\n\nCommands:\n", version)
	sort.Slice(commands, func(i, j int) bool { return commands[i].name < commands[j].name })
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun \"vmpayload <command> -h\" for a command's flags.\n")
}

// newFlags makes a FlagSet whose usage text names the command.
func newFlags(c command, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("vmpayload "+c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: vmpayload %s %s\n\n%s\n\nFlags:\n", c.name, c.usage, c.summary)
		fs.PrintDefaults()
	}
	return fs
}

// parseInterspersed parses flags that may come before or after the
// positional arguments ("build job.json -o out.iso").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseOrUsage handles -h and flag errors uniformly.
func parseOrUsage(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, exitOK, false
	}
	if err != nil {
		return nil, exitUsage, false
	}
	return pos, 0, true
}

// readInput reads a file, or standard input for "-".
func readInput(name string, limit int64) ([]byte, error) {
	var r io.Reader
	var buf bytes.Buffer
	if name == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
		// a regular file is read in one call into a buffer of its size
		// (a megabyte job took a dozen reads and as many copies)
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() <= limit {
			buf.Grow(int(st.Size()) + bytes.MinRead)
		}
	}
	if _, err := buf.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, strings.TrimSuffix(word, "s"))
}
