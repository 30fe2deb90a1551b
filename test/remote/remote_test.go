// Package remote_test checks "--connect ssh://" (issue 43) against a real
// Debian sshd on 127.0.0.1 (its own port, host key, sshd_config and
// authorized keys, started and stopped by the test) with a real agent
// behind it, on libvirt's in-process test:///default driver. The client is
// the built vmpayload binary, its ssh the system's, configured with -F
// through VMPAYLOAD_SSH_COMMAND. Runs as root (sshd, throwaway users).
package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// rig is one sshd and one agent.
type rig struct {
	dir, bin, sock, sshCfg string
	port                   int
	agent                  *agenttest.Agent
	// users: admin (socket and admin group), plain (socket group), nokey
	// (no authorized key), nopath (vmpayload not on its PATH)
	admin, plain, nokey, nopath string
}

func need(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs sshd and adds throwaway users")
	}
	for _, p := range []string{"/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s missing (test/deps.sh installs openssh-server and openssh-client): %v", p, err)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func addGroup(t *testing.T, name string) {
	t.Helper()
	run(t, "groupadd", name)
	t.Cleanup(func() { exec.Command("groupdel", name).Run() })
}

func addUser(t *testing.T, name, home string, groups ...string) {
	t.Helper()
	// "*": no password, but not a locked account (sshd without PAM
	// refuses locked ones)
	args := []string{"--create-home", "--home-dir", home, "--shell", "/bin/sh", "--user-group", "--password", "*"}
	if len(groups) > 0 {
		args = append(args, "--groups", strings.Join(groups, ","))
	}
	run(t, "useradd", append(args, name)...)
	t.Cleanup(func() { exec.Command("userdel", "--remove", name).Run() })
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func setup(t *testing.T) *rig {
	need(t)
	sfx := testenv.RandHex(t, 3)
	r := &rig{dir: testenv.WorkDir(t, "rmt-"), admin: "rmta" + sfx, plain: "rmtp" + sfx, nokey: "rmtn" + sfx, nopath: "rmtx" + sfx}
	sockGroup, adminGroup := "rmts"+sfx, "rmtg"+sfx
	addGroup(t, sockGroup)
	addGroup(t, adminGroup)
	for _, d := range []string{"bin", "keys", "home", "client"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(r.dir, "state"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(r.dir, "state"), 0o1777)
	os.Chmod(filepath.Join(r.dir, "client"), 0o700)
	addUser(t, r.admin, filepath.Join(r.dir, "home", r.admin), sockGroup, adminGroup)
	addUser(t, r.plain, filepath.Join(r.dir, "home", r.plain), sockGroup)
	addUser(t, r.nokey, filepath.Join(r.dir, "home", r.nokey), sockGroup)
	addUser(t, r.nopath, filepath.Join(r.dir, "home", r.nopath), sockGroup)

	// the binaries where every user can run them
	built := agenttest.BinaryT(t)
	for _, b := range []string{"vmpayload", "vmpayloadd"} {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(built), b))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r.dir, "bin", b), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.bin = filepath.Join(r.dir, "bin", "vmpayload")

	// the agent: socket group and admin group as a host would set them
	r.agent = agenttest.Start(t, agenttest.Options{Bin: r.bin, URI: "test:///default", Dir: filepath.Join(r.dir, "agent"),
		Args: []string{"--socket-group", sockGroup, "--admin-group", adminGroup}})
	r.sock = r.agent.Socket

	// keys: the host's, and the client's (authorized for every user but nokey)
	hostKey := filepath.Join(r.dir, "host_ed25519")
	userKey := filepath.Join(r.dir, "client", "id_ed25519")
	run(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rmt-host", "-f", hostKey)
	run(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rmt-client", "-f", userKey)
	pub, err := os.ReadFile(userKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{r.admin, r.plain, r.nopath} {
		if err := os.WriteFile(filepath.Join(r.dir, "keys", u), pub, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	r.port = freePort(t)
	cfg := filepath.Join(r.dir, "sshd_config")
	pidFile := filepath.Join(r.dir, "sshd.pid")
	writeFile(t, cfg, fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AuthorizedKeysFile %s/keys/%%u
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin no
AllowUsers %s %s %s %s
LogLevel VERBOSE
SetEnv PATH=%s/bin:/usr/bin:/bin
Match User %s
	SetEnv PATH=/usr/bin:/bin
`, r.port, hostKey, pidFile, r.dir, r.admin, r.plain, r.nokey, r.nopath, r.dir, r.nopath), 0o600)
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // privilege separation directory
		t.Fatal(err)
	}
	run(t, "/usr/sbin/sshd", "-t", "-f", cfg)
	logPath := filepath.Join(r.dir, "sshd.log")
	sshd := exec.Command("/usr/sbin/sshd", "-D", "-f", cfg, "-E", logPath)
	if err := sshd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { sshd.Wait(); close(exited) }()
	t.Cleanup(func() {
		sshd.Process.Kill() // ours, by pid
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("sshd log:\n%s", testenv.Tail(string(b), 60))
		}
	})
	// wait until it listens (a deadline for a stuck start, not a timing check)
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.port))
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("sshd exited: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd does not listen on 127.0.0.1:%d", r.port)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// the client's ssh configuration: this host key only, this identity
	hostPub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	known := filepath.Join(r.dir, "client", "known_hosts")
	writeFile(t, known, fmt.Sprintf("[127.0.0.1]:%d %s", r.port, hostPub), 0o600)
	r.sshCfg = filepath.Join(r.dir, "client", "ssh_config")
	writeFile(t, r.sshCfg, fmt.Sprintf(`Host *
	IdentityFile %s
	IdentitiesOnly yes
	IdentityAgent none
	UserKnownHostsFile %s
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	LogLevel ERROR
`, userKey, known), 0o600)
	return r
}

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// uri is ssh://user@127.0.0.1:port with the agent socket and the query q.
func (r *rig) uri(user, q string) string {
	u := fmt.Sprintf("ssh://%s@127.0.0.1:%d?socket=%s", user, r.port, r.sock)
	if q != "" {
		u += "&" + q
	}
	return u
}

// vmpayload runs the client with the rig's ssh configuration and returns
// its exit status, standard output and standard error.
func (r *rig) vmpayload(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Env = append(os.Environ(), "VMPAYLOAD_SSH_COMMAND=ssh -F "+r.sshCfg, "VMPAYLOAD_CONNECT=")
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running vmpayload: %v", err)
	}
	t.Logf("vmpayload %s → %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// job writes a job that defines and starts domain dom (domain_xml: a
// privileged field) and returns its path.
func (r *rig) job(t *testing.T, id, dom string) string {
	t.Helper()
	xml := testenv.Domain{Type: "test", Name: dom, MemoryMiB: 64}.XML()
	doc := map[string]any{"version": 1, "domain": dom, "action": "start", "domain_xml": xml, "hostname": dom,
		"runcmd": []string{"echo remote"}}
	if id != "" {
		doc["id"] = id
	}
	b, _ := json.Marshal(doc)
	p := filepath.Join(r.dir, "state", dom+".json")
	writeFile(t, p, string(b), 0o644)
	return p
}

func TestRemoteSSH(t *testing.T) {
	r := setup(t)

	t.Run("submit --wait=guest over ssh", func(t *testing.T) {
		// the test driver's domains run no guest: a job without a guest
		// report is done for --wait=guest once it is final
		p := r.job(t, "rmt-g", "rmt-domg")
		b, _ := os.ReadFile(p)
		writeFile(t, p, strings.Replace(string(b), "{", `{"guest_report":false,`, 1), 0o644)
		code, out, errs := r.vmpayload(t, nil, "submit", "--connect", r.uri(r.admin, "command="+r.bin), "--wait=guest", p)
		if code != 0 || !strings.Contains(out, `"state": "done"`) {
			t.Fatalf("exit %d; want 0 and the done result\n%s%s", code, out, errs)
		}
	})

	t.Run("submit --wait over ssh (command= the built binary)", func(t *testing.T) {
		code, out, errs := r.vmpayload(t, nil, "submit", "--connect", r.uri(r.admin, "command="+r.bin), "--wait", r.job(t, "rmt-1", "rmt-dom1"))
		if code != 0 || !strings.Contains(out, "queued rmt-1") || !strings.Contains(out, `"state": "done"`) {
			t.Fatalf("exit %d; want 0, queued and a done result\n%s%s", code, out, errs)
		}
		// the agent saw the ssh user through SO_PEERCRED
		res, _, err := r.agent.Client().Job(context.Background(), "rmt-1", client.JobQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Submitter == nil || res.Submitter.User != r.admin {
			t.Errorf("submitter %+v; want the ssh user %s", res.Submitter, r.admin)
		}
	})

	t.Run("run --wait through VMPAYLOAD_CONNECT with vmpayload on the remote PATH", func(t *testing.T) {
		xml := filepath.Join(r.dir, "state", "rmt-dom2.xml")
		writeFile(t, xml, testenv.Domain{Type: "test", Name: "rmt-dom2", MemoryMiB: 64}.XML(), 0o644)
		code, out, errs := r.vmpayload(t, []string{"VMPAYLOAD_CONNECT=" + r.uri(r.admin, "")},
			"run", "rmt-dom2", "--domain-xml", xml, "--hostname", "rmt-dom2", "--wait")
		if code != 0 || !strings.Contains(out, "queued job-") || !strings.Contains(out, `"state": "done"`) {
			t.Fatalf("exit %d; want 0 and a done result\n%s%s", code, out, errs)
		}
	})

	t.Run("non-admin refused domain_xml with the same 403 as locally", func(t *testing.T) {
		jobPath := r.job(t, "rmt-3", "rmt-dom3")
		code, _, remote := r.vmpayload(t, nil, "submit", "--connect", r.uri(r.plain, "command="+r.bin), jobPath)
		cmd := exec.Command("runuser", "-u", r.plain, "--", r.bin, "submit", "--socket", r.sock, jobPath)
		var lerr bytes.Buffer
		cmd.Stderr = &lerr
		err := cmd.Run()
		lcode := 0
		if ee, ok := err.(*exec.ExitError); ok {
			lcode = ee.ExitCode()
		}
		t.Logf("local: exit %d: %s", lcode, lerr.String())
		if code != lcode || code != 2 {
			t.Errorf("remote exit %d, local exit %d; want both 2", code, lcode)
		}
		if !strings.Contains(remote, "answered 403") || !strings.Contains(lerr.String(), "answered 403") {
			t.Errorf("want 403 both ways:\nremote: %s\nlocal: %s", remote, lerr.String())
		}
		msg := func(s string) string { _, m, _ := strings.Cut(s, "403: "); m, _, _ = strings.Cut(m, "\n"); return m }
		if msg(remote) == "" || msg(remote) != msg(lerr.String()) {
			t.Errorf("the agent's refusal differs:\nremote: %q\nlocal: %q", msg(remote), msg(lerr.String()))
		}
		if !strings.Contains(remote, "domain_xml") {
			t.Errorf("the refusal does not name domain_xml: %s", remote)
		}
	})

	t.Run("dropped connection: the retry is answered with the first submission", func(t *testing.T) {
		before, _ := agenttest.Metric(context.Background(), r.agent.Client(), "vmpayload_jobs_received_total", `source="socket"`)
		// the first connection delivers the request, reads the agent's
		// answer's first bytes and drops; later ones go through
		state := filepath.Join(r.dir, "state")
		wrapper := filepath.Join(r.dir, "bin", "dropfirst")
		writeFile(t, wrapper, fmt.Sprintf(`#!/bin/sh
if mkdir %[1]s/dropped 2>/dev/null; then
	mkfifo %[1]s/fifo
	exec 3<&0 # an asynchronous command's stdin is /dev/null unless redirected
	%[2]s "$@" <&3 >%[1]s/fifo &
	pid=$!
	head -c 12 <%[1]s/fifo >%[1]s/first-answer
	kill $pid
	exit 0
fi
exec %[2]s "$@"
`, state, r.bin), 0o755)
		code, out, errs := r.vmpayload(t, nil, "submit", "--connect", r.uri(r.admin, "command="+wrapper), "--wait", r.job(t, "", "rmt-dom4"))
		first, _ := os.ReadFile(filepath.Join(state, "first-answer"))
		if string(first) != "HTTP/1.1 202" {
			t.Fatalf("the first connection's answer began %q; want the agent's 202 (the drop came too early)", first)
		}
		if code != 0 || !strings.Contains(out, `"state": "done"`) || !strings.Contains(errs, "not submitted again") {
			t.Fatalf("exit %d; want 0, the first submission's done result, and the notice\n%s%s", code, out, errs)
		}
		after, _ := agenttest.Metric(context.Background(), r.agent.Client(), "vmpayload_jobs_received_total", `source="socket"`)
		if after-before != 1 {
			t.Errorf("the agent received %v jobs; want 1 (submitted once)", after-before)
		}
	})

	t.Run("errors: one line naming the host, exit 2", func(t *testing.T) {
		dead := freePort(t)
		for _, c := range []struct{ name, uri, want string }{
			{"unreachable port", fmt.Sprintf("ssh://%s@127.0.0.1:%d", r.admin, dead), "Connection refused"},
			{"refused key", r.uri(r.nokey, "command="+r.bin), "Permission denied (publickey)"},
			{"no vmpayload on the PATH", r.uri(r.nopath, ""), "vmpayload: not found"},
			{"agent socket missing", fmt.Sprintf("ssh://%s@127.0.0.1:%d?socket=/nonexistent/agent.sock", r.admin, r.port), "no agent on /nonexistent/agent.sock"},
		} {
			t.Run(c.name, func(t *testing.T) {
				code, out, errs := r.vmpayload(t, nil, "submit", "--connect", c.uri, r.job(t, "rmt-e", "rmt-dome"))
				lines := strings.Split(strings.TrimSpace(errs), "\n")
				if code != 2 || len(lines) != 1 || !strings.Contains(errs, "127.0.0.1") || !strings.Contains(errs, c.want) || out != "" {
					t.Errorf("exit %d, stderr %q; want 2 and one line naming 127.0.0.1 and %q", code, errs, c.want)
				}
			})
		}
	})

	t.Run("bad URIs: one error naming the URI, exit 2", func(t *testing.T) {
		for _, u := range []string{"http://h", "ssh://", "ssh://h:99999", "ssh://h:x", "ssh://h?sock=/x", "ssh://u:pw@h", "unix://h/x", "unix:relative", "ssh://h/path"} {
			code, out, errs := r.vmpayload(t, nil, "status", "--connect", u)
			if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, strconv.Quote(u)) || out != "" {
				t.Errorf("--connect %s: exit %d, stderr %q; want 2 and one line quoting the URI", u, code, errs)
			}
		}
	})

	t.Run("status ID and its completion over ssh", func(t *testing.T) {
		code, out, _ := r.vmpayload(t, nil, "status", "--connect", r.uri(r.admin, "command="+r.bin), "rmt-1")
		if code != 0 || !strings.Contains(out, `"state": "done"`) {
			t.Errorf("status rmt-1: exit %d\n%s", code, out)
		}
		_, out, _ = r.vmpayload(t, nil, "__complete", "status", "--connect", r.uri(r.admin, "command="+r.bin), "")
		if !strings.Contains(out, "rmt-1\n") {
			t.Errorf("status ID does not complete to the remote agent's rmt-1:\n%s", out)
		}
	})

	t.Run("status of several hosts: one table, a dead host is a row", func(t *testing.T) {
		dead := freePort(t)
		deadURI := fmt.Sprintf("ssh://%s@127.0.0.1:%d", r.admin, dead)
		code, out, errs := r.vmpayload(t, nil, "status", "--connect", r.uri(r.admin, "command="+r.bin),
			"--connect", "unix://"+r.sock, "--connect", deadURI)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 4 {
			t.Fatalf("exit %d, %d lines; want 0 and a header and three rows\n%s%s", code, len(lines), out, errs)
		}
		if !strings.HasPrefix(lines[0], "HOST") || !strings.Contains(lines[1], r.admin+"@127.0.0.1:") || !strings.Contains(lines[1], " ok ") ||
			!strings.Contains(lines[1], " done") || !strings.Contains(lines[2], r.sock) || !strings.Contains(lines[2], " ok ") {
			t.Errorf("rows of the live hosts:\n%s", out)
		}
		if !strings.Contains(lines[3], fmt.Sprintf("127.0.0.1:%d", dead)) || !strings.Contains(lines[3], "down") || !strings.Contains(lines[3], "Connection refused") {
			t.Errorf("row of the dead host: %q", lines[3])
		}
	})
}
