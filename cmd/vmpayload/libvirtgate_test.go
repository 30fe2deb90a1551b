package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/cmd/vmpayload/internal/libvirtgate"
	"github.com/vmpayload/vmpayload/internal/agenttest"
)

// mappedLibvirt matches the dynamic loader's LD_DEBUG=files line for loading
// libvirt's client library.
var mappedLibvirt = regexp.MustCompile(`file=\S*libvirt\.so[.0-9]* \[\d+\];\s+generating link map`)

// TestOfflineCommandsDoNotLoadLibvirt runs the built binary's offline
// subcommands under the dynamic loader's LD_DEBUG=files trace and fails if
// any of them maps libvirt (issue 14: libvirtgate must keep working whatever
// the binary comes to import). The agent, which needs libvirt, is the
// positive control: it must still map it.
func TestOfflineCommandsDoNotLoadLibvirt(t *testing.T) {
	dir := t.TempDir()
	bin := agenttest.BinaryT(t)
	payload, secrets := filepath.Join(dir, "payload"), filepath.Join(dir, "secrets")
	must(t, os.Mkdir(payload, 0o755))
	must(t, os.Mkdir(secrets, 0o700))
	must(t, os.WriteFile(filepath.Join(secrets, "pw"), []byte("s3cret\n"), 0o600))
	cfg := filepath.Join(dir, "agent.yaml")
	must(t, os.WriteFile(cfg, []byte("payload_dir: "+payload+"\nsecrets_dir: "+secrets+"\n"), 0o644))
	job := "../../configs/examples/02-full-nocloud.json"
	iso := filepath.Join(dir, "seed.iso")
	domXML := "<domain type='qemu'><name>gate</name><uuid>0b3f1c44-1d2e-4f5a-8b6c-7d8e9fa0b1c2</uuid>" +
		"<memory unit='MiB'>48</memory><os><type arch='x86_64' machine='pc'>hvm</type></os><devices/></domain>"
	domFile := filepath.Join(dir, "dom.xml")
	must(t, os.WriteFile(domFile, []byte(domXML), 0o644))
	sock := filepath.Join(dir, "no-agent.sock")

	for _, tc := range []struct {
		name    string
		args    []string
		stdin   string
		exit    int // -1: any
		libvirt bool
		offline string // the libvirtgate.Offline key exercised
	}{
		{"no arguments", nil, "", 2, false, ""},
		{"help", []string{"help"}, "", 0, false, "help"},
		{"-h", []string{"-h"}, "", 0, false, "-h"},
		{"--help", []string{"--help"}, "", 0, false, "--help"},
		{"version", []string{"version"}, "", 0, false, "version"},
		{"validate", []string{"validate", job}, "", 0, false, "validate"},
		{"build", []string{"build", "-o", iso, job}, "", 0, false, "build"},
		{"inspect", []string{"inspect", iso}, "", 0, false, "inspect"},
		{"recipe", []string{"recipe", "--payload-dir", payload, "--secrets-dir", secrets, "--domain-xml", domFile, job}, "", 0, false, "recipe"},
		{"hook, no recipe", []string{"hook", "--config", cfg, "gate", "prepare", "begin", "-"}, domXML, 0, false, "hook"},
		{"hook, no-op operation", []string{"hook", "--config", cfg, "gate", "stopped", "end", "-"}, "", 0, false, "hook"},
		{"submit without an agent", []string{"submit", "--socket", sock, job}, "", -1, false, "submit"},
		{"status without an agent", []string{"status", "--socket", sock}, "", -1, false, "status"},
		{"run without an agent", []string{"run", "gate", "--hostname", "gate", "--socket", sock, "--spool-dir", filepath.Join(dir, "spool")}, "", -1, false, "run"},
		{"run --print-job", []string{"run", "gate", "--hostname", "gate", "--print-job"}, "", 0, false, "run"},
		// the positive control: the agent loads libvirt
		{"agent", []string{"agent", "--config", "", "--print-config"}, "", 0, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.offline != "" && !libvirtgate.Offline[tc.offline] {
				t.Fatalf("%q is not in libvirtgate.Offline", tc.offline)
			}
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), "LD_DEBUG=files")
			cmd.Stdin = strings.NewReader(tc.stdin)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := cmd.ProcessState.ExitCode()
			if tc.exit >= 0 && code != tc.exit {
				t.Fatalf("exit %d (%v), want %d; stderr:\n%s", code, err, tc.exit, tail(stderr.String(), 2000))
			}
			if got := mappedLibvirt.MatchString(stderr.String()); got != tc.libvirt {
				t.Errorf("libvirt mapped: %v, want %v; LD_DEBUG trace:\n%s", got, tc.libvirt, tail(stderr.String(), 2000))
			}
		})
	}
}

// TestOfflineListNamesCommands keeps libvirtgate.Offline in step with the
// registered subcommands: a renamed command must not silently lose the gate.
func TestOfflineListNamesCommands(t *testing.T) {
	names := map[string]bool{"": true, "help": true, "-h": true, "--help": true}
	for _, c := range commands {
		names[c.name] = true
	}
	for k := range libvirtgate.Offline {
		if !names[k] {
			t.Errorf("libvirtgate.Offline names %q, which is no subcommand", k)
		}
	}
	if libvirtgate.Offline["agent"] {
		t.Error("the agent needs libvirt but is listed as offline")
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
