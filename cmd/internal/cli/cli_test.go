package cli

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vmpayload/vmpayload/agent/config"
)

// tree is a small command tree like vmpayload's: an interspersed command
// with a value flag, a bool flag and a one-letter shorthand, a hook-like
// command whose flags end at the first argument, and a pass-through.
func tree() *cobra.Command {
	root := &cobra.Command{Use: "x"}
	b := &cobra.Command{Use: "build", RunE: func(*cobra.Command, []string) error { return nil }}
	b.Flags().StringP("output", "o", "", "")
	b.Flags().String("runcmd", "", "")
	b.Flags().Bool("json", false, "")
	h := &cobra.Command{Use: "hook", RunE: func(*cobra.Command, []string) error { return nil }}
	h.Flags().String("config", "", "")
	NotInterspersed(h)
	a := &cobra.Command{Use: "agent", DisableFlagParsing: true, RunE: func(*cobra.Command, []string) error { return nil }}
	root.AddCommand(b, h, a)
	return root
}

func TestNormalize(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"build -o out.iso job.json", "build -o out.iso job.json"},
		{"build --o out.iso job.json", "build -o out.iso job.json"},
		{"build -o=out.iso -json job.json", "build -o=out.iso --json job.json"},
		{"build job.json -json -output out.iso", "build job.json --json --output out.iso"},
		{"build -json=true -runcmd=-x -", "build --json=true --runcmd=-x -"},
		// a flag's value is left alone, even when it looks like a flag
		{"build -runcmd -json job.json", "build --runcmd -json job.json"},
		{"build -o -json job.json", "build -o -json job.json"},
		// after "--" nothing is a flag
		{"build -json -- -x -y", "build --json -- -x -y"},
		// unknown long names are rewritten too, for pflag's error to name them
		{"build -password x", "build --password x"},
		{"-help", "--help"},
		{"build -h", "build -h"},
		// the hook: flags end at the domain
		{"hook -config c.yaml dom prepare begin -", "hook --config c.yaml dom prepare begin -"},
		{"hook dom -config prepare begin", "hook dom -config prepare begin"},
		{"hook -- -dom prepare begin -", "hook -- -dom prepare begin -"},
		// the agent pass-through gets its arguments verbatim
		{"agent -config x -workers 3", "agent -config x -workers 3"},
	} {
		got := strings.Join(Normalize(tree(), strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("Normalize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestExecuteCodes: a command's ExitCode is the exit status; flag, argument
// and unknown-command errors are ExitUsage with a message on stderr.
func TestExecuteCodes(t *testing.T) {
	mk := func() *cobra.Command {
		root := tree()
		root.AddCommand(&cobra.Command{Use: "fail", RunE: func(*cobra.Command, []string) error { return ExitCode(ExitInvalid) }},
			&cobra.Command{Use: "one", Args: cobra.ExactArgs(1), RunE: func(*cobra.Command, []string) error { return nil }})
		return root
	}
	for _, c := range []struct {
		args   string
		code   int
		stderr string
	}{
		{"build -o x job", ExitOK, ""},
		{"fail", ExitInvalid, ""},
		{"build --nope", ExitUsage, "unknown flag: --nope"},
		{"build -nope", ExitUsage, "unknown flag: --nope"},
		{"one", ExitUsage, "accepts 1 arg"},
		{"frobnicate", ExitUsage, `unknown command "frobnicate"`},
	} {
		var out, errb bytes.Buffer
		code := Execute(mk(), strings.Fields(c.args), &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.stderr) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.stderr)
		}
	}
}

// TestDaemonCommand: the daemon's flags reach config.Resolve, in either
// spelling, and --print-config prints the result.
func TestDaemonCommand(t *testing.T) {
	for _, args := range [][]string{
		{"--config", "", "--print-config", "--workers", "7"},
		{"-config=", "-print-config", "-workers", "7"},
	} {
		var out, errb bytes.Buffer
		code := Execute(NewDaemonCommand(nil), args, &out, &errb)
		if code != ExitOK || !strings.Contains(out.String(), "workers: 7\n") || !strings.Contains(out.String(), "libvirt_uri: qemu:///system") {
			t.Errorf("%q: exit %d %s %s", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Execute(NewDaemonCommand(nil), []string{"--config", "", "--cdrom-bus", "floppy"}, &out, &errb); code != ExitUsage || !strings.Contains(errb.String(), "floppy") {
		t.Errorf("bad value: exit %d %q", code, errb.String())
	}
	// without a serve function (the pure binary) it refuses to run
	errb.Reset()
	if code := Execute(NewDaemonCommand(nil), []string{"--config", ""}, &out, &errb); code != ExitUsage || !strings.Contains(errb.String(), DaemonPath) {
		t.Errorf("no serve: exit %d %q", code, errb.String())
	}
	// serve gets the flags as given, for the reload
	var got []string
	cmd := NewDaemonCommand(func(_ config.Config, args []string, _, _ io.Writer) int { got = args; return 3 })
	if code := Execute(cmd, []string{"--config", "", "-workers=5"}, &out, &errb); code != 3 || !slices.Equal(got, []string{"--config=", "--workers=5"}) {
		t.Errorf("serve: exit %d, args %q", code, got)
	}
}
