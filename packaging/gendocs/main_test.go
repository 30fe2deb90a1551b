package main

import (
	"strings"
	"testing"
)

const listOut = `vmpayload 1.2.3 — cloud-init payloads for libvirt domains

Usage:
  vmpayload <command> [flags] [args]

Commands:
  agent     run the host agent
  build     render a job's cloud-init documents and write the payload image

Run "vmpayload <command> -h" for a command's flags.
`

const buildOut = "Usage: vmpayload build [--secrets-dir DIR] -o OUT JOB.json|-\n\nwrite a job's payload image\n\nFlags:\n" +
	"  -json\n    \tprint the result as JSON\n" +
	"  -mode string\n    \tpermission bits of the image file (octal) (default \"0640\")\n" +
	"  -o string\n    \toutput image path (required)\n" +
	"  -secrets-dir string\n    \tdirectory where password_secret\n    \tnames resolve\n" +
	"  -x\tshort boolean\n"

func TestParse(t *testing.T) {
	title, cmds, err := ParseCommandList(listOut)
	if err != nil {
		t.Fatal(err)
	}
	if title != "cloud-init payloads for libvirt domains" {
		t.Errorf("title %q", title)
	}
	if len(cmds) != 2 || cmds[0].Name != "agent" || cmds[1].Name != "build" || cmds[0].Summary != "run the host agent" {
		t.Fatalf("commands %+v", cmds)
	}
	c := cmds[1]
	ParseCommandHelp(c, buildOut)
	if c.Synopsis != "vmpayload build [--secrets-dir DIR] -o OUT JOB.json|-" {
		t.Errorf("synopsis %q", c.Synopsis)
	}
	if len(c.Text) != 0 {
		t.Errorf("summary restatement kept: %q", c.Text)
	}
	want := []Flag{
		{"json", "", "print the result as JSON"},
		{"mode", "string", `permission bits of the image file (octal) (default "0640")`},
		{"o", "string", "output image path (required)"},
		{"secrets-dir", "string", "directory where password_secret names resolve"},
		{"x", "", "short boolean"},
	}
	if len(c.Flags) != len(want) {
		t.Fatalf("flags %+v", c.Flags)
	}
	for i := range want {
		if c.Flags[i] != want[i] {
			t.Errorf("flag %d: got %+v want %+v", i, c.Flags[i], want[i])
		}
	}
}

func TestNotHelp(t *testing.T) {
	c := &Command{Name: "version", Summary: "print the version"}
	ParseCommandHelp(c, "vmpayload 1.2.3\n")
	if c.Synopsis != "" || len(c.Text) != 0 || len(c.Flags) != 0 {
		t.Errorf("version output parsed as help: %+v", c)
	}
}

func TestRender(t *testing.T) {
	_, cmds, _ := ParseCommandList(listOut)
	ParseCommandHelp(cmds[1], buildOut)
	ParseCommandHelp(cmds[0], "Usage: vmpayload agent [flags]\n\nrun the host agent\n\nFlags:\n  -config string\n    \tconfiguration FILE\n")
	h := &Help{Version: "1.2.3", Title: "t", Commands: cmds}
	man := ManMain(h, "2026-01-02")
	for _, s := range []string{`.TH VMPAYLOAD 1 "2026-01-02" "vmpayload 1.2.3"`, `\fB\-o\fR \fIstring\fR`, `\fB\-\-secrets\-dir\fR`, `vmpayload\-agent\fR(8)`} {
		if !strings.Contains(man, s) {
			t.Errorf("vmpayload.1 lacks %q", s)
		}
	}
	agent := ManAgent(h, "2026-01-02")
	if !strings.Contains(agent, ".SH OPTIONS\n.TP\n\\fB\\-\\-config\\fR \\fIstring\\fR\nconfiguration FILE\n") {
		t.Errorf("vmpayload-agent.8 options:\n%s", agent)
	}
	bash := Bash(h)
	for _, s := range []string{`--secrets-dir|-secrets-dir) COMPREPLY=($(compgen -d`, `-o) COMPREPLY=($(compgen -f`, `--config|-config) COMPREPLY=($(compgen -f`, `compgen -W "agent build help"`} {
		if !strings.Contains(bash, s) {
			t.Errorf("bash completion lacks %q\n%s", s, bash)
		}
	}
	if z := Zsh(h); !strings.HasPrefix(z, "#compdef vmpayload\n") || !strings.Contains(z, `'(-secrets-dir --secrets-dir)'{-secrets-dir,--secrets-dir}'[directory where password_secret names resolve]:string:_files -/'`) {
		t.Errorf("zsh completion:\n%s", z)
	}
	if got := roff(".x -y \\z"); got != `\&.x \-y \ez` {
		t.Errorf("roff %q", got)
	}
}

// TestRenderChoicesRepeatableDomain: a placeholder listing values completes
// them, a repeatable flag may be given again in zsh, and a DOMAIN argument
// completes from virsh.
func TestRenderChoicesRepeatableDomain(t *testing.T) {
	c := &Command{Name: "run", Summary: "s"}
	ParseCommandHelp(c, "Usage: vmpayload run DOMAIN [flags]\n\ns\n\nFlags:\n  -format nocloud|configdrive\n    \tpayload layout\n  -nic MAC\n    \tguest NIC (repeatable)\n  -hostname NAME\n    \thost name\n")
	if len(c.Flags) != 3 || c.Flags[0].Arg != "nocloud|configdrive" {
		t.Fatalf("parsed %+v", c.Flags)
	}
	h := &Help{Version: "1", Title: "t", Commands: []*Command{c}}
	bash := Bash(h)
	for _, s := range []string{`--format|-format) COMPREPLY=($(compgen -W "nocloud configdrive" -- "$cur")); return 0 ;;`,
		`compgen -W "$(virsh list --all --name 2>/dev/null)"`, `--nic|-nic|--hostname|-hostname) return 0 ;;`} {
		if !strings.Contains(bash, s) {
			t.Errorf("bash completion lacks %q\n%s", s, bash)
		}
	}
	z := Zsh(h)
	for _, s := range []string{`:nocloud|configdrive:(nocloud configdrive)'`, `'*'{-nic,--nic}'[guest NIC (repeatable)]:MAC: '`,
		`'(-hostname --hostname)'{-hostname,--hostname}`, `'1:libvirt domain:_vmpayload_domains'`, "_vmpayload_domains() {"} {
		if !strings.Contains(z, s) {
			t.Errorf("zsh completion lacks %q\n%s", s, z)
		}
	}
}
