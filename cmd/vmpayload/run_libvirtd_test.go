package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestLibvirtdRun runs "vmpayload run" against a real agent (the built
// binary) on the shared libvirtd: a start job that defines a tiny OS-less
// domain from --domain-xml and gives it a hostname, a user with a password
// from a file, a NIC, a file and a command; then --detach; then --attach
// through the spool while the socket is unreachable, to the stopped domain.
// Each step waits with
// --wait and is checked against libvirt and the payload image itself.
func TestLibvirtdRun(t *testing.T) {
	testenv.NeedLibvirtd(t)
	name := "vmpayload-runtest-" + testenv.RandHex(t, 4)

	// Under /var/tmp, traversable, so libvirt-qemu can open the payload image.
	base := testenv.WorkDir(t, "vmpayload-runtest-")
	a := agenttest.Start(t, agenttest.Options{URI: "qemu:///system", Dir: base, Args: []string{"--rescan-interval", "1s", "--log-level", "debug"}})
	bin, spoolDir, sock := a.Bin, a.SpoolDir, a.Socket
	t.Cleanup(func() {
		virsh(t, "destroy", name)
		virsh(t, "undefine", name, "--managed-save")
	})

	// input files, as an operator has them
	domXML := filepath.Join(base, "dom.xml")
	writeFile(t, domXML, testenv.Domain{Name: name, Boot: "hd"}.XML())
	pw, motd := filepath.Join(base, "alice.pw"), filepath.Join(base, "motd")
	writeFile(t, pw, "run-test-password\n")
	writeFile(t, motd, "provisioned by vmpayload run\n")

	// 1. start: the agent defines the domain, attaches the payload, starts it
	res, errb := runAndWait(t, "run", name, "--socket", sock, "--spool-dir", spoolDir, "--wait", "--timeout", "5m",
		"--id", name+"-start", "--domain-xml", domXML, "--hostname", "run1.example.com", "--user", "alice",
		"--password-file", pw, "--nic", "52:54:00:7e:57:01,ip=192.0.2.10/24,gw=192.0.2.1", "--dns", "192.0.2.53",
		"--file", motd+":/etc/motd:0644", "--runcmd", "touch /var/lib/run-test")
	if res.State != result.StateDone || res.Payload == nil || res.Domain != name {
		t.Fatalf("start job: %+v\n%s", res, errb)
	}
	if !strings.Contains(errb, name+"-start done") {
		t.Errorf("--wait showed no progress ending in done:\n%s", errb)
	}
	if st, _ := virsh(t, "domstate", name); strings.TrimSpace(st) != "running" {
		t.Errorf("domstate %q, want running", st)
	}
	if bl, _ := virsh(t, "domblklist", name); !strings.Contains(bl, res.Payload.Path) {
		t.Errorf("domblklist lacks the payload %s:\n%s", res.Payload.Path, bl)
	}
	// the image holds what the flags said, and the password only hashed
	ud := inspectCat(t, bin, res.Payload.Path, "user-data")
	for _, want := range []string{"name: alice", "provisioned by vmpayload run", "touch /var/lib/run-test", "$6$"} {
		if !strings.Contains(ud, want) {
			t.Errorf("user-data lacks %q:\n%s", want, ud)
		}
	}
	if strings.Contains(ud, "run-test-password") {
		t.Errorf("the plaintext password reached the image")
	}
	if md := inspectCat(t, bin, res.Payload.Path, "meta-data"); !strings.Contains(md, "run1.example.com") {
		t.Errorf("meta-data lacks the hostname:\n%s", md)
	}
	if nc := inspectCat(t, bin, res.Payload.Path, "network-config"); !strings.Contains(nc, "192.0.2.10/24") || !strings.Contains(nc, "192.0.2.53") {
		t.Errorf("network-config lacks the NIC:\n%s", nc)
	}
	if b, _ := os.ReadFile(a.LogPath); bytes.Contains(b, []byte("run-test-password")) {
		t.Errorf("the password is in the agent's log")
	}

	// 2. detach: the payload leaves the domain
	res, errb = runAndWait(t, "run", name, "--detach", "--socket", sock, "--spool-dir", spoolDir, "--wait", "--timeout", "5m", "--id", name+"-detach")
	if res.State != result.StateDone {
		t.Fatalf("detach job: %+v\n%s", res, errb)
	}
	if bl, _ := virsh(t, "domblklist", name); strings.Contains(bl, a.PayloadDir) {
		t.Errorf("domblklist still shows a payload after --detach:\n%s", bl)
	}

	// 3. attach through the spool (no agent on the given socket) to the
	// stopped domain
	if o, err := virsh(t, "destroy", name); err != nil {
		t.Fatalf("virsh destroy: %v %s", err, o)
	}
	res, errb = runAndWait(t, "run", name, "--attach", "--socket", filepath.Join(base, "nobody.sock"), "--spool-dir", spoolDir,
		"--wait", "--timeout", "5m", "--id", name+"-spool", "--hostname", "run2.example.com")
	if res.State != result.StateDone || res.Payload == nil {
		t.Fatalf("attach job through the spool: %+v\n%s", res, errb)
	}
	if bl, _ := virsh(t, "domblklist", name); !strings.Contains(bl, res.Payload.Path) {
		t.Errorf("domblklist lacks the payload attached through the spool %s:\n%s", res.Payload.Path, bl)
	}
	if md := inspectCat(t, bin, res.Payload.Path, "meta-data"); !strings.Contains(md, "run2.example.com") {
		t.Errorf("meta-data of the attached payload lacks the new hostname:\n%s", md)
	}
}

// runAndWait runs a CLI command that prints "queued ..." and then the
// result as JSON, and returns the result and the progress on stderr.
func runAndWait(t *testing.T, args ...string) (result.Result, string) {
	t.Helper()
	code, out, errb := runCLI(t, args...)
	var res result.Result
	i := strings.Index(out, "{")
	if i < 0 || !strings.HasPrefix(out, "queued ") {
		t.Fatalf("%s: exit %d, no queued line and result:\n%s\n%s", args[0], code, out, errb)
	}
	if err := json.Unmarshal([]byte(out[i:]), &res); err != nil {
		t.Fatalf("%s: result: %v\n%s", args[0], err, out)
	}
	if (code == exitOK) != (res.State == result.StateDone) {
		t.Errorf("exit %d for state %s", code, res.State)
	}
	return res, errb
}

func inspectCat(t *testing.T, bin, image, file string) string {
	t.Helper()
	out, err := exec.Command(bin, "inspect", "--cat", file, image).Output()
	if err != nil {
		t.Errorf("inspect --cat %s %s: %v", file, image, err)
	}
	return string(out)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
