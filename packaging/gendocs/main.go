// Command gendocs generates vmpayload's manual pages (roff, gzipped) and its
// bash and zsh completion scripts from the binary's own help output:
// "vmpayload help" for the command list and "vmpayload <cmd> -h" for each
// command's usage line, summary and flags. packaging/build.sh runs it against
// the binary that goes into the packages, so the pages never drift from the
// code.
//
//	go run ./packaging/gendocs -bin dist/pkgbuild/vmpayload -out dist/pkgbuild/docs -version 1.2.3
package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Flag is one flag parsed from a command's help text.
type Flag struct {
	Name  string // without dashes
	Arg   string // value placeholder ("string", "FILE"); empty for booleans
	Usage string
}

// Command is one subcommand of the binary as its help describes it.
type Command struct {
	Name     string
	Summary  string   // one line, from "vmpayload help"
	Synopsis string   // the "Usage:" line without "Usage: "
	Text     []string // other paragraphs of the help (description)
	Flags    []Flag
	Missing  bool // the binary does not have this command (yet)
}

// Help is everything gendocs knows about the binary.
type Help struct {
	Version  string
	Title    string // first line of "vmpayload help", after the version
	Commands []*Command
}

var cmdLine = regexp.MustCompile(`^  ([a-z][a-z0-9-]*)\s+(.*)$`)

// ParseCommandList reads the output of "vmpayload help".
func ParseCommandList(out string) (title string, cmds []*Command, err error) {
	lines := strings.Split(strings.ReplaceAll(out, "\r", ""), "\n")
	if len(lines) > 0 {
		title = strings.TrimSpace(lines[0])
		if i := strings.Index(title, " — "); i >= 0 {
			title = title[i+len(" — "):]
		} else if i := strings.Index(title, " - "); i >= 0 {
			title = title[i+3:]
		}
	}
	in := false
	for _, l := range lines {
		switch {
		case strings.TrimSpace(l) == "Commands:":
			in = true
		case in && strings.TrimSpace(l) == "":
			if len(cmds) > 0 {
				in = false
			}
		case in:
			m := cmdLine.FindStringSubmatch(l)
			if m == nil {
				return "", nil, fmt.Errorf("unexpected line in command list: %q", l)
			}
			cmds = append(cmds, &Command{Name: m[1], Summary: strings.TrimSpace(m[2])})
		}
	}
	if len(cmds) == 0 {
		return "", nil, errors.New("no \"Commands:\" section in the help output")
	}
	return title, cmds, nil
}

// flagLine matches the first line of a flag in Go's flag.PrintDefaults
// format ("  -name type" or "  -x\tusage"), also with "--name".
var flagLine = regexp.MustCompile(`^ {1,4}--?([A-Za-z0-9][A-Za-z0-9_.-]*)(?:[ =]([^\t]*?))?\s*(?:\t(.*))?$`)

// ParseCommandHelp fills c from the output of "vmpayload <cmd> -h".
func ParseCommandHelp(c *Command, out string) {
	lines := strings.Split(strings.ReplaceAll(out, "\r", ""), "\n")
	inFlags := false
	var para []string
	flush := func() {
		if len(para) > 0 {
			c.Text = append(c.Text, strings.Join(para, " "))
			para = nil
		}
	}
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "Usage:") && c.Synopsis == "":
			c.Synopsis = strings.TrimSpace(strings.TrimPrefix(t, "Usage:"))
		case t == "Flags:" || t == "Options:":
			flush()
			inFlags = true
		case inFlags && flagLine.MatchString(l):
			m := flagLine.FindStringSubmatch(l)
			c.Flags = append(c.Flags, Flag{Name: m[1], Arg: strings.TrimSpace(m[2]), Usage: strings.TrimSpace(m[3])})
		case inFlags && t != "" && len(c.Flags) > 0 && (strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "    ")):
			f := &c.Flags[len(c.Flags)-1]
			f.Usage = strings.TrimSpace(f.Usage + " " + t)
		case t == "":
			flush()
		case inFlags:
			flush()
			inFlags = false
			para = append(para, t)
		default:
			para = append(para, t)
		}
	}
	flush()
	if c.Synopsis == "" {
		// Not a help text (e.g. "version -h" just prints the version).
		c.Text, c.Flags = nil, nil
		return
	}
	// The first paragraph restates the command's summary (newFlags prints
	// it); the list's summary is kept, a one-line restatement is dropped.
	if len(c.Text) > 0 {
		first := c.Text[0]
		if c.Summary == "" {
			c.Summary = first
			c.Text = c.Text[1:]
		} else if len(first) <= 120 && !strings.Contains(strings.TrimSuffix(first, "."), ". ") {
			c.Text = c.Text[1:]
		}
	}
}

// collect runs the binary and parses its help.
func collect(bin, version string) (*Help, error) {
	out, err := exec.Command(bin, "help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s help: %v\n%s", bin, err, out)
	}
	title, cmds, err := ParseCommandList(string(out))
	if err != nil {
		return nil, err
	}
	h := &Help{Version: version, Title: title, Commands: cmds}
	for _, c := range cmds {
		// -h prints usage to stderr and exits 0 with the flag package;
		// accept any exit status as long as there is a Usage line.
		out, _ := exec.Command(bin, c.Name, "-h").CombinedOutput()
		ParseCommandHelp(c, string(out))
		if c.Synopsis == "" {
			c.Synopsis = "vmpayload " + c.Name
		}
	}
	if h.find("agent") == nil {
		h.Commands = append(h.Commands, &Command{Name: "agent", Missing: true,
			Summary:  "run the vmpayload host agent (daemon)",
			Synopsis: "vmpayload agent [--config FILE] [flags]"})
	}
	return h, nil
}

func (h *Help) find(name string) *Command {
	for _, c := range h.Commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// roff escapes text for a roff body line.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	s = strings.ReplaceAll(s, "—", `\(em`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// flagName spells a flag the way the docs do: "-o", "--secrets-dir" (Go's
// flag package accepts one or two dashes).
func flagName(f Flag) string {
	if len(f.Name) == 1 {
		return "-" + f.Name
	}
	return "--" + f.Name
}

func writeFlags(b *strings.Builder, c *Command) {
	for _, f := range c.Flags {
		b.WriteString(".TP\n")
		fmt.Fprintf(b, `\fB%s\fR`, roff(flagName(f)))
		if f.Arg != "" {
			fmt.Fprintf(b, ` \fI%s\fR`, roff(f.Arg))
		}
		b.WriteString("\n" + roff(f.Usage) + "\n")
	}
}

func header(b *strings.Builder, name, section string, h *Help, date string) {
	fmt.Fprintf(b, ".\\\" Generated by packaging/gendocs from \"vmpayload help\"; do not edit.\n")
	fmt.Fprintf(b, ".TH %s %s %q %q %q\n", strings.ToUpper(name), section, date, "vmpayload "+h.Version, "vmpayload manual")
}

// ManMain renders vmpayload(1).
func ManMain(h *Help, date string) string {
	var b strings.Builder
	header(&b, "vmpayload", "1", h, date)
	b.WriteString(".SH NAME\nvmpayload \\- " + roff(h.Title) + "\n")
	b.WriteString(".SH SYNOPSIS\n.B vmpayload\n.I command\n[\\fIflags\\fR] [\\fIargs\\fR]\n")
	b.WriteString(".SH DESCRIPTION\n")
	b.WriteString("\\fBvmpayload\\fR validates VM start jobs, renders their cloud\\-init documents " +
		"(NoCloud or OpenStack config\\-drive v2), writes the payload image, and, as the host agent " +
		"(see \\fBvmpayload\\-agent\\fR(8)), attaches it to a libvirt domain as a CD\\-ROM and starts the domain.\n")
	b.WriteString(".SH COMMANDS\n")
	for _, c := range h.Commands {
		if c.Name == "agent" {
			b.WriteString(".TP\n.B agent\n" + roff(c.Summary) + "; see \\fBvmpayload\\-agent\\fR(8).\n")
			continue
		}
		b.WriteString(".SS " + roff(c.Name) + "\n")
		fmt.Fprintf(&b, ".B %s\n.PP\n%s\n", roff(c.Synopsis), roff(c.Summary))
		for _, p := range c.Text {
			b.WriteString(".PP\n" + roff(p) + "\n")
		}
		if len(c.Flags) > 0 {
			b.WriteString(".PP\nFlags:\n.RS\n")
			writeFlags(&b, c)
			b.WriteString(".RE\n")
		}
	}
	b.WriteString(".SH EXIT STATUS\n0 on success; 1 when the input is invalid (validate, build); 2 for bad flags or arguments, or an I/O problem.\n")
	b.WriteString(".SH FILES\n.TP\n.I /etc/vmpayload/agent.yaml\nagent configuration\n" +
		".TP\n.I /etc/vmpayload/secrets/\nsecrets referenced by jobs' *_secret fields\n" +
		".TP\n.I /etc/libvirt/hooks/qemu.d/vmpayload\nlibvirt qemu hook: runs \\fBvmpayload hook\\fR before a domain starts, is restored or migrates in\n")
	b.WriteString(".SH SEE ALSO\n\\fBvmpayload\\-agent\\fR(8), \\fBcloud\\-init\\fR(1), \\fBvirsh\\fR(1)\n")
	return b.String()
}

// ManAgent renders vmpayload-agent(8).
func ManAgent(h *Help, date string) string {
	c := h.find("agent")
	var b strings.Builder
	header(&b, "vmpayload-agent", "8", h, date)
	b.WriteString(".SH NAME\nvmpayload\\-agent \\- " + roff(c.Summary) + "\n")
	b.WriteString(".SH SYNOPSIS\n.B " + roff(c.Synopsis) + "\n")
	b.WriteString(".SH DESCRIPTION\n")
	b.WriteString("The agent takes VM start jobs (JSON files dropped into the spool directory, or POSTed to " +
		"its unix socket), renders the cloud\\-init documents, builds the payload image, attaches it to the " +
		"libvirt domain as a read\\-only CD\\-ROM and starts the domain. It is normally run by systemd as " +
		"\\fBvmpayload.service\\fR; it reports readiness with sd_notify and reloads its configuration on SIGHUP.\n")
	for _, p := range c.Text {
		b.WriteString(".PP\n" + roff(p) + "\n")
	}
	if c.Missing {
		b.WriteString(".PP\nThe vmpayload binary these pages were generated from has no \\fBagent\\fR command; " +
			"its flags are not listed.\n")
	}
	if len(c.Flags) > 0 {
		b.WriteString(".SH OPTIONS\n")
		writeFlags(&b, c)
	}
	b.WriteString(".SH FILES\n" +
		".TP\n.I /etc/vmpayload/agent.yaml\nconfiguration (a package conffile, kept on upgrade)\n" +
		".TP\n.I /etc/vmpayload/secrets/\nsecrets directory (0700)\n" +
		".TP\n.I /var/spool/vmpayload/{incoming,processing,done,failed}/\njob spool\n" +
		".TP\n.I /run/vmpayload/vmpayload.sock\nthe API socket\n" +
		".TP\n.I /run/payload/\npayload images\n" +
		".TP\n.I /usr/lib/systemd/system/vmpayload.service\nthe systemd unit\n")
	b.WriteString(".SH SIGNALS\n.TP\n.B SIGHUP\nreload the configuration\n.TP\n.BR SIGTERM \", \" SIGINT\nstop taking jobs and exit\n")
	b.WriteString(".SH SEE ALSO\n\\fBvmpayload\\fR(1), \\fBsystemctl\\fR(1), \\fBlibvirtd\\fR(8)\n")
	return b.String()
}

// fileFlags are flags whose value is a directory rather than a file.
func isDirFlag(f Flag) bool {
	return strings.HasSuffix(f.Name, "-dir") || strings.Contains(strings.ToUpper(f.Arg), "DIR")
}

func isPathFlag(f Flag) bool {
	if f.Arg == "" {
		return false
	}
	if isDirFlag(f) {
		return true
	}
	n := f.Name
	return n == "o" || n == "config" || n == "socket" || strings.HasSuffix(n, "-file") ||
		strings.Contains(strings.ToUpper(f.Arg), "FILE") || strings.Contains(strings.ToUpper(f.Arg), "PATH")
}

var choiceArg = regexp.MustCompile(`^[a-z0-9-]+(\|[a-z0-9-]+)+$`)

// choices returns the values of a flag whose placeholder lists them
// ("nocloud|configdrive"), or nil.
func choices(f Flag) []string {
	if !choiceArg.MatchString(f.Arg) {
		return nil
	}
	return strings.Split(f.Arg, "|")
}

// repeatable reports whether the flag's help says it may be given more than once.
func repeatable(f Flag) bool { return strings.Contains(f.Usage, "repeatable") }

// takesDomain reports whether the command's first argument is a libvirt
// domain ("vmpayload run DOMAIN ..."): completed from virsh.
func takesDomain(c *Command) bool {
	return strings.HasPrefix(c.Synopsis, "vmpayload "+c.Name+" DOMAIN")
}

// spellings are the ways a flag can be typed.
func spellings(f Flag) []string {
	if len(f.Name) == 1 {
		return []string{"-" + f.Name}
	}
	return []string{"--" + f.Name, "-" + f.Name}
}

// Bash renders the bash completion script.
func Bash(h *Help) string {
	var b strings.Builder
	b.WriteString("# bash completion for vmpayload; generated by packaging/gendocs from \"vmpayload help\".\n")
	b.WriteString("_vmpayload() {\n\tlocal cur prev cmd i\n\tCOMPREPLY=()\n")
	b.WriteString("\tcur=\"${COMP_WORDS[COMP_CWORD]}\"\n\tprev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n")
	var names []string
	for _, c := range h.Commands {
		names = append(names, c.Name)
	}
	b.WriteString("\tcmd=\"\"\n\tfor ((i = 1; i < COMP_CWORD; i++)); do\n\t\tcase \"${COMP_WORDS[i]}\" in\n")
	fmt.Fprintf(&b, "\t\t%s) cmd=\"${COMP_WORDS[i]}\"; break ;;\n", strings.Join(names, "|"))
	b.WriteString("\t\tesac\n\tdone\n")
	fmt.Fprintf(&b, "\tif [[ -z $cmd ]]; then\n\t\tCOMPREPLY=($(compgen -W \"%s help\" -- \"$cur\"))\n\t\treturn 0\n\tfi\n", strings.Join(names, " "))
	b.WriteString("\tcase \"$cmd\" in\n")
	for _, c := range h.Commands {
		var all, dirs, files []string
		for _, f := range c.Flags {
			all = append(all, flagName(f))
			switch {
			case isDirFlag(f) && f.Arg != "":
				dirs = append(dirs, spellings(f)...)
			case isPathFlag(f):
				files = append(files, spellings(f)...)
			}
		}
		fmt.Fprintf(&b, "\t%s)\n\t\tcase \"$prev\" in\n", c.Name)
		if len(dirs) > 0 {
			fmt.Fprintf(&b, "\t\t%s) COMPREPLY=($(compgen -d -- \"$cur\")); return 0 ;;\n", strings.Join(dirs, "|"))
		}
		if len(files) > 0 {
			fmt.Fprintf(&b, "\t\t%s) COMPREPLY=($(compgen -f -- \"$cur\")); return 0 ;;\n", strings.Join(files, "|"))
		}
		var valued []string
		for _, f := range c.Flags {
			if ch := choices(f); ch != nil {
				fmt.Fprintf(&b, "\t\t%s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return 0 ;;\n", strings.Join(spellings(f), "|"), strings.Join(ch, " "))
				continue
			}
			if f.Arg != "" && !isPathFlag(f) && !(isDirFlag(f) && f.Arg != "") {
				valued = append(valued, spellings(f)...)
			}
		}
		if len(valued) > 0 {
			fmt.Fprintf(&b, "\t\t%s) return 0 ;;\n", strings.Join(valued, "|"))
		}
		b.WriteString("\t\tesac\n")
		fmt.Fprintf(&b, "\t\tif [[ $cur == -* ]]; then\n\t\t\tCOMPREPLY=($(compgen -W \"%s\" -- \"$cur\"))\n", strings.Join(all, " "))
		if takesDomain(c) {
			b.WriteString("\t\telse\n\t\t\tCOMPREPLY=($(compgen -W \"$(virsh list --all --name 2>/dev/null)\" -- \"$cur\"))\n\t\tfi\n\t\t;;\n")
		} else {
			b.WriteString("\t\telse\n\t\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\t\tfi\n\t\t;;\n")
		}
	}
	b.WriteString("\tesac\n}\ncomplete -o filenames -F _vmpayload vmpayload\n")
	return b.String()
}

func zshQuote(s string) string {
	s = strings.ReplaceAll(s, `'`, `'\''`)
	s = strings.ReplaceAll(s, `[`, `\[`)
	s = strings.ReplaceAll(s, `]`, `\]`)
	s = strings.ReplaceAll(s, `:`, `\:`)
	return s
}

// Zsh renders the zsh completion function.
func Zsh(h *Help) string {
	var b strings.Builder
	b.WriteString("#compdef vmpayload\n# zsh completion for vmpayload; generated by packaging/gendocs from \"vmpayload help\".\n\n")
	b.WriteString("_vmpayload_domains() {\n\tlocal -a doms\n\tdoms=(${(f)\"$(virsh list --all --name 2>/dev/null)\"})\n\t_describe -t domains 'libvirt domain' doms\n}\n\n")
	b.WriteString("_vmpayload() {\n\tlocal curcontext=\"$curcontext\" state line\n\ttypeset -A opt_args\n")
	b.WriteString("\t_arguments -C '1: :->cmds' '*:: :->args'\n\tcase $state in\n\tcmds)\n\t\tlocal -a cmds\n\t\tcmds=(\n")
	for _, c := range h.Commands {
		fmt.Fprintf(&b, "\t\t\t'%s:%s'\n", c.Name, zshQuote(c.Summary))
	}
	b.WriteString("\t\t\t'help:show the commands or a command'\\''s flags'\n")
	b.WriteString("\t\t)\n\t\t_describe -t commands 'vmpayload command' cmds\n\t\t;;\n\targs)\n\t\tcase $line[1] in\n")
	for _, c := range h.Commands {
		fmt.Fprintf(&b, "\t\t%s)\n\t\t\t_arguments \\\n", c.Name)
		for _, f := range c.Flags {
			action := ""
			switch {
			case choices(f) != nil:
				action = ":" + zshQuote(f.Arg) + ":(" + strings.Join(choices(f), " ") + ")"
			case f.Arg == "":
			case isDirFlag(f):
				action = ":" + zshQuote(f.Arg) + ":_files -/"
			case isPathFlag(f):
				action = ":" + zshQuote(f.Arg) + ":_files"
			default:
				action = ":" + zshQuote(f.Arg) + ": "
			}
			excl := fmt.Sprintf("'(-%s --%s)'", f.Name, f.Name)
			if repeatable(f) {
				excl = "'*'"
			}
			fmt.Fprintf(&b, "\t\t\t\t%s{-%s,--%s}'[%s]%s' \\\n", excl, f.Name, f.Name, zshQuote(f.Usage), action)
		}
		if takesDomain(c) {
			b.WriteString("\t\t\t\t'1:libvirt domain:_vmpayload_domains'\n\t\t\t;;\n")
		} else {
			b.WriteString("\t\t\t\t'*:file:_files'\n\t\t\t;;\n")
		}
	}
	b.WriteString("\t\thelp)\n\t\t\t_arguments '1:command:(" + strings.Join(func() []string {
		var n []string
		for _, c := range h.Commands {
			n = append(n, c.Name)
		}
		return n
	}(), " ") + ")'\n\t\t\t;;\n")
	b.WriteString("\t\tesac\n\t\t;;\n\tesac\n}\n\n_vmpayload \"$@\"\n")
	return b.String()
}

// gz compresses like "gzip -9n": no name, no timestamp, reproducible.
func gz(data string) ([]byte, error) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write([]byte(data)); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func main() {
	bin := flag.String("bin", "vmpayload", "the vmpayload binary to read the help of")
	out := flag.String("out", ".", "output directory")
	version := flag.String("version", "", "version for the page footers (default: from the help output)")
	date := flag.String("date", "", "date for the page footers, YYYY-MM-DD (default: $SOURCE_DATE_EPOCH or today)")
	flag.Parse()
	if *date == "" {
		t := time.Now().UTC()
		if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
			var sec int64
			if _, err := fmt.Sscan(e, &sec); err == nil {
				t = time.Unix(sec, 0).UTC()
			}
		}
		*date = t.Format("2006-01-02")
	}
	h, err := collect(*bin, *version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
	if h.Version == "" {
		h.Version = "unknown"
	}
	man1, err1 := gz(ManMain(h, *date))
	man8, err2 := gz(ManAgent(h, *date))
	if err := errors.Join(err1, err2, os.MkdirAll(*out, 0o755)); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
	files := map[string][]byte{
		"vmpayload.1.gz":       man1,
		"vmpayload-agent.8.gz": man8,
		"vmpayload.bash":       []byte(Bash(h)),
		"_vmpayload":           []byte(Zsh(h)),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(*out, name), data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gendocs:", err)
			os.Exit(1)
		}
	}
	if h.find("agent").Missing {
		fmt.Fprintln(os.Stderr, "gendocs: note: the binary has no agent command; vmpayload-agent(8) lists no flags")
	}
}
