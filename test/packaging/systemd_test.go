// Package packaging tests vmpayload's packages under a real systemd: a
// Debian 12 root booted with systemd-nspawn (systemd as PID 1), the .deb
// from packaging/build.sh installed, started, reloaded, stopped, upgraded,
// removed and purged. The .rpm is installed into a separate root with
// rpm --root. test/packaging/check.sh checks the packages' contents.
package packaging

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// rootPackages are installed into the cached Debian 12 root: systemd as
// init, D-Bus for systemctl, and the .deb's dependency.
var rootPackages = []string{"systemd", "systemd-sysv", "dbus", "libvirt0"}

const cacheDir = "/var/cache/vmpayload/nspawn"

// container is a booted systemd-nspawn container.
type container struct {
	t      *testing.T
	root   string
	cmd    *exec.Cmd
	leader int // the container's PID 1 (systemd), as the host sees it
	exited chan struct{}
	log    string
}

// TestSystemdPackage installs the .deb in a Debian 12 container whose PID 1
// is systemd and checks the service as systemd runs it.
func TestSystemdPackage(t *testing.T) {
	if os.Getenv("VMPAYLOAD_SYSTEMD") != "1" {
		t.Skip("set VMPAYLOAD_SYSTEMD=1 (needs root, systemd-nspawn and mmdebstrap; boots a Debian 12 container)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tool := range []string{"systemd-nspawn", "mmdebstrap", "nsenter", "rpm", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (apt-get install systemd-container mmdebstrap util-linux rpm)", tool)
		}
	}
	work := testenv.TempDir(t, "/var/tmp", "vmpayload-systemd-", 0)

	// two builds: the one installed and the upgrade
	v1, v2 := "0.0.1~systemdtest1", "0.0.1~systemdtest2"
	deb1, rpm1 := buildPackages(t, work, v1, "deb", "rpm")
	deb2, _ := buildPackages(t, work, v2, "deb")
	tarball := debianRoot(t)

	t.Run("rpm", func(t *testing.T) { checkRPM(t, work, tarball, rpm1) })

	c := boot(t, work, tarball)
	for _, f := range []string{deb1, deb2} {
		copyFile(t, f, filepath.Join(c.root, "root", filepath.Base(f)))
	}

	// install: files land, the service is not started
	c.must("dpkg", "-i", "/root/"+filepath.Base(deb1))
	if st := c.out("systemctl", "is-active", "vmpayload"); st != "inactive" {
		t.Errorf("after install the service is %q, want inactive (never started on install)", st)
	}
	for _, d := range []string{"/run/payload", "/run/vmpayload", "/var/spool/vmpayload/incoming"} {
		if c.run("test", "-d", d) != nil {
			t.Errorf("%s is missing after install (tmpfiles.d)", d)
		}
	}
	if g := c.out("stat", "-c", "%a %U:%G", "/run/vmpayload"); g != "750 root:vmpayload" {
		t.Errorf("/run/vmpayload is %q, want 750 root:vmpayload", g)
	}

	// the operator's edit: the test driver, JSON logs, a marker
	c.editConfig(map[string]string{"libvirt_uri": "test:///default"}, "# edited by TestSystemdPackage")

	// as libvirtd would have made it (ReadWritePaths=-/run/libvirt)
	c.must("mkdir", "-p", "/run/libvirt")
	// start: active (running) only once the agent said READY
	c.must("systemctl", "start", "vmpayload")
	show := c.show("ActiveState", "SubState", "Type", "StatusText", "MainPID", "NRestarts")
	if show["ActiveState"] != "active" || show["SubState"] != "running" || show["Type"] != "notify" {
		t.Fatalf("after systemctl start: %v\n%s", show, c.journal())
	}
	// STATUS=running comes with the agent's READY=1 (one sd_notify message)
	if show["StatusText"] != "running" {
		t.Errorf("StatusText %q: systemd did not get the agent's READY=1/STATUS=running", show["StatusText"])
	}
	// systemctl start returned, so the socket must answer now
	if out, err := c.exec("vmpayload", "status"); err != nil {
		t.Errorf("the packaged socket does not answer right after systemctl start: %v\n%s", err, out)
	}
	pid1 := show["MainPID"]
	// the resource limits docs/reliability.md justifies, on the running
	// unit and on its process (soft and hard open-file limit)
	if m := c.show("LimitNOFILE", "LimitNOFILESoft", "MemoryMax", "TasksMax"); m["LimitNOFILE"] != "8192" || m["LimitNOFILESoft"] != "8192" ||
		m["MemoryMax"] != strconv.Itoa(1<<30) || m["TasksMax"] != "512" {
		t.Errorf("resource limits of the running unit: %v; want LimitNOFILE 8192 (soft too), MemoryMax 1G, TasksMax 512", m)
	}
	if lim := c.out("sh", "-c", "grep '^Max open files' /proc/"+pid1+"/limits"); len(strings.Fields(lim)) < 5 ||
		strings.Fields(lim)[3] != "8192" || strings.Fields(lim)[4] != "8192" {
		t.Errorf("the agent's open-file limit: %q; want 8192 8192", lim)
	}

	// a job through the packaged socket path (the defaults of agent.yaml)
	domXML := "<domain type='test'><name>systemd-vm</name><memory unit='MiB'>64</memory><os><type arch='x86_64'>hvm</type></os></domain>"
	for _, n := range []string{"", "2", "3"} {
		c.writeFile("/root/dom"+n+".xml", strings.Replace(domXML, "systemd-vm", "systemd-vm"+n, 1))
	}
	c.writeFile("/root/pw", "systemd-test-password\n")
	out, err := c.exec("vmpayload", "run", "systemd-vm", "--domain-xml", "/root/dom.xml", "--hostname", "systemd-vm.example.com",
		"--user", "alice", "--password-file", "/root/pw", "--id", "systemd-job-1", "--wait", "--timeout", "2m")
	if err != nil || !strings.Contains(out, `"state": "done"`) {
		t.Errorf("job through /run/vmpayload/vmpayload.sock: %v\n%s\n%s", err, out, c.journal())
	}
	if c.run("test", "-s", "/var/spool/vmpayload/done/systemd-job-1.json") != nil {
		t.Errorf("no result in /var/spool/vmpayload/done for the job")
	}
	images := c.out("sh", "-c", "ls /run/payload/*.iso 2>/dev/null | wc -l")
	if images != "1" {
		t.Errorf("%s payload images in /run/payload, want 1", images)
	}

	// the sandbox, seen from inside the agent's own mount namespace
	t.Run("sandbox", func(t *testing.T) {
		mainPID := pid1
		for _, d := range []string{"/var/spool/vmpayload", "/run/payload", "/run/vmpayload", "/run/libvirt"} {
			if out, err := c.inService(mainPID, "sh", "-c", "mkdir -p "+d+" && touch "+d+"/.sandbox-probe && rm "+d+"/.sandbox-probe"); err != nil {
				t.Errorf("the service cannot write in %s: %v %s", d, err, out)
			}
		}
		for _, p := range []string{"/etc/libvirt/hooks/qemu.d/vmpayload", "/etc/vmpayload/agent.yaml", "/usr/bin/vmpayload", "/usr/sbin/vmpayloadd"} {
			if out, err := c.inService(mainPID, "test", "-r", p); err != nil {
				t.Errorf("the service cannot read %s: %v %s", p, err, out)
			}
		}
		for _, p := range []string{"/etc/sandbox-probe", "/usr/sandbox-probe", "/var/lib/sandbox-probe", "/etc/libvirt/hooks/qemu.d/sandbox-probe", "/root/sandbox-probe"} {
			out, err := c.inService(mainPID, "touch", p)
			if err == nil {
				t.Errorf("the service could write %s", p)
				c.exec("rm", "-f", p)
			} else if !strings.Contains(out, "Read-only file system") && !strings.Contains(out, "Permission denied") && !strings.Contains(out, "No such file") {
				t.Errorf("write to %s failed for another reason: %s", p, out)
			}
		}
		// no network but unix sockets: a TCP socket is refused by RestrictAddressFamilies
		if m := c.show("RestrictAddressFamilies", "ProtectSystem", "PrivateNetwork"); m["ProtectSystem"] != "strict" || m["PrivateNetwork"] != "yes" {
			t.Errorf("sandbox properties: %v", m)
		}
	})

	// journal: the agent's attributes are fields of their own (it uses the
	// native protocol when JOURNAL_STREAM says stderr is the journal)
	t.Run("journal", func(t *testing.T) {
		var jobDone map[string]string
		// journald takes the entries asynchronously
		eventually(func() bool {
			for _, e := range c.journalJSON() {
				if e["_SYSTEMD_UNIT"] == "vmpayload.service" && e["ID"] == "systemd-job-1" && strings.HasPrefix(e["MESSAGE"], "job done") {
					jobDone = e
				}
			}
			return jobDone != nil
		})
		want := map[string]string{"DOMAIN": "systemd-vm", "STATE": "done", "ACTION": "start", "SOURCE": "socket",
			"PRIORITY": "6", "SYSLOG_IDENTIFIER": "vmpayload", "_PID": pid1}
		if jobDone == nil {
			t.Fatalf("no journal entry with ID=systemd-job-1 and MESSAGE \"job done ...\":\n%s", c.exec2("journalctl", "-u", "vmpayload", "-o", "json"))
		}
		for k, v := range want {
			if jobDone[k] != v {
				t.Errorf("job done entry: %s=%q, want %q (entry %v)", k, jobDone[k], v, jobDone)
			}
		}
		if _, ok := jobDone["IMAGE"]; !ok {
			t.Errorf("job done entry lacks IMAGE: %v", jobDone)
		}
		// filtering by field works
		if out := c.out("journalctl", "-u", "vmpayload", "-o", "cat", "ID=systemd-job-1"); !strings.Contains(out, "job done") {
			t.Errorf("journalctl ID=systemd-job-1 finds %q", out)
		}
	})

	// reload: the agent re-reads agent.yaml; log_format json shows in the
	// journal from then on
	c.editConfig(map[string]string{"log_format": "json"}, "")
	since := c.out("date", "+%s.%N")
	c.must("systemctl", "reload", "vmpayload")
	if m := c.show("MainPID", "ActiveState", "SubState"); m["MainPID"] != pid1 || m["ActiveState"] != "active" || m["SubState"] != "running" {
		t.Errorf("after reload: %v, want the same MainPID %s, active (running)", m, pid1)
	}
	if out, err := c.exec("vmpayload", "run", "systemd-vm2", "--domain-xml", "/root/dom2.xml", "--hostname", "second.example.com",
		"--id", "systemd-job-2", "--wait", "--timeout", "2m"); err != nil {
		t.Errorf("job after reload: %v\n%s", err, out)
	}
	var after string
	eventually(func() bool {
		after = c.exec2("journalctl", "-u", "vmpayload", "--since", "@"+since, "-o", "cat", "_PID="+pid1)
		return strings.Contains(after, `"id":"systemd-job-2"`)
	})
	if !strings.Contains(after, `"msg":"configuration reloaded"`) && !strings.Contains(after, `msg="configuration reloaded"`) {
		t.Errorf("the journal does not show the reload:\n%s", after)
	}
	if !strings.Contains(after, `"msg":"job done"`) || !strings.Contains(after, `"id":"systemd-job-2"`) {
		t.Errorf("after reloading with log_format: json the agent does not log JSON:\n%s", after)
	}

	// stop drains: running jobs finish, exit is clean; a job accepted just
	// before stop is either done or still in the spool (the API queues
	// through it), and runs at the next start
	c.must("sh", "-c", "vmpayload run systemd-vm3 --domain-xml /root/dom3.xml --id systemd-job-3 && systemctl stop vmpayload")
	if m := c.show("ActiveState", "Result", "ExecMainStatus"); m["ActiveState"] != "inactive" || m["Result"] != "success" || m["ExecMainStatus"] != "0" {
		t.Errorf("after stop: %v", m)
	}
	job3 := c.out("sh", "-c", "cd /var/spool/vmpayload && ls done/systemd-job-3.json incoming/systemd-job-3.json processing/systemd-job-3.json* 2>/dev/null")
	if job3 == "" {
		t.Errorf("the job accepted before stop is neither done nor in the spool:\n%s", c.journal())
	}
	var j string
	eventually(func() bool {
		j = c.journal()
		return strings.Contains(j, "finishing running jobs") && strings.Contains(j, "agent stopped")
	})
	if !strings.Contains(j, "finishing running jobs") || !strings.Contains(j, "agent stopped") {
		t.Errorf("no drain in the journal:\n%s", j)
	}
	if c.run("test", "-e", "/run/vmpayload/vmpayload.sock") == nil {
		t.Errorf("the socket is left behind after stop")
	}

	// upgrade: the edit stays, a running service is restarted
	c.must("systemctl", "start", "vmpayload")
	eventually(func() bool { return c.run("test", "-s", "/var/spool/vmpayload/done/systemd-job-3.json") == nil })
	if c.run("test", "-s", "/var/spool/vmpayload/done/systemd-job-3.json") != nil {
		t.Errorf("the job accepted before stop (%s) is not done after the next start:\n%s", job3, c.journal())
	}
	pidBefore := c.show("MainPID")["MainPID"]
	c.must("dpkg", "-i", "/root/"+filepath.Base(deb2))
	if v := c.out("vmpayload", "version"); v != "vmpayload "+v2 {
		t.Errorf("after upgrade: %q, want vmpayload %s", v, v2)
	}
	cfg := c.out("cat", "/etc/vmpayload/agent.yaml")
	if !strings.Contains(cfg, "# edited by TestSystemdPackage") || !strings.Contains(cfg, "libvirt_uri: test:///default") {
		t.Errorf("the upgrade lost the edits of agent.yaml:\n%s", cfg)
	}
	if m := c.show("MainPID", "ActiveState", "SubState"); m["MainPID"] == pidBefore || m["ActiveState"] != "active" || m["SubState"] != "running" {
		t.Errorf("after upgrade: %v, want a new MainPID (was %s), active (running)", m, pidBefore)
	}

	// remove: the service stops, program files go, config and jobs stay
	c.must("dpkg", "-r", "vmpayload")
	if st := c.out("systemctl", "is-active", "vmpayload"); st == "active" {
		t.Errorf("the service is still active after dpkg -r")
	}
	for _, p := range []string{"/usr/bin/vmpayload", "/usr/sbin/vmpayloadd", "/usr/lib/systemd/system/vmpayload.service", "/etc/libvirt/hooks/qemu.d/vmpayload", "/run/vmpayload"} {
		if c.run("test", "-e", p) == nil {
			t.Errorf("%s is left after dpkg -r", p)
		}
	}
	for _, p := range []string{"/etc/vmpayload/agent.yaml", "/var/spool/vmpayload/done/systemd-job-1.json"} {
		if c.run("test", "-e", p) != nil {
			t.Errorf("%s is gone after dpkg -r (remove keeps configuration and results)", p)
		}
	}
	// purge: configuration goes; the spool stays only while it holds jobs
	c.must("dpkg", "-P", "vmpayload")
	if c.run("test", "-e", "/etc/vmpayload/agent.yaml") == nil {
		t.Errorf("agent.yaml is left after purge")
	}
	c.must("rm", "-rf", "/var/spool/vmpayload/done", "/var/spool/vmpayload/failed")
	c.must("dpkg", "-i", "/root/"+filepath.Base(deb2))
	c.must("dpkg", "-P", "vmpayload")
	for _, p := range []string{"/etc/vmpayload", "/var/spool/vmpayload", "/usr/bin/vmpayload", "/usr/sbin/vmpayloadd", "/run/vmpayload"} {
		if c.run("test", "-e", p) == nil {
			t.Errorf("%s is left after purging an unused installation:\n%s", p, c.exec2("find", p))
		}
	}
	if st := c.out("sh", "-c", "systemctl list-unit-files vmpayload.service | grep -c vmpayload || true"); st != "0" {
		t.Errorf("systemd still knows vmpayload.service after purge")
	}
}

// buildPackages runs packaging/build.sh with version v and moves the
// packages into dir.
func buildPackages(t *testing.T, dir, v string, formats ...string) (deb, rpm string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"packaging/build.sh"}, formats...)...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "VMPAYLOAD_VERSION="+v)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("packaging/build.sh %v: %v\n%s", formats, err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, "dist/") {
			continue
		}
		dst := filepath.Join(dir, filepath.Base(l))
		if err := os.Rename(filepath.Join("../..", l), dst); err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(l) {
		case ".deb":
			deb = dst
		case ".rpm":
			rpm = dst
		}
	}
	return deb, rpm
}

// debianRoot returns a tarball of a minimal Debian 12 root with
// rootPackages, made with mmdebstrap from the host's apt mirror once and
// cached.
func debianRoot(t *testing.T) string {
	t.Helper()
	tarball := filepath.Join(cacheDir, "bookworm-"+strings.Join(rootPackages, "-")+".tar")
	if st, err := os.Stat(tarball); err == nil && st.Size() > 0 {
		return tarball
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := tarball + ".tmp"
	out, err := exec.Command("mmdebstrap", "--variant=minbase", "--format=tar", "--include="+strings.Join(rootPackages, ","), "bookworm", tmp).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		t.Fatalf("mmdebstrap: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, tarball); err != nil {
		t.Fatal(err)
	}
	return tarball
}

func unpack(t *testing.T, tarball, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-C", dir, "-xf", tarball).CombinedOutput(); err != nil {
		t.Fatalf("unpacking %s: %v\n%s", tarball, err, out)
	}
}

// boot unpacks a fresh root and boots it; the container is powered off in
// t.Cleanup.
func boot(t *testing.T, work, tarball string) *container {
	t.Helper()
	rnd := make([]byte, 3)
	_, _ = rand.Read(rnd)
	name := "vmp-" + hex.EncodeToString(rnd)
	c := &container{t: t, root: filepath.Join(work, name), log: filepath.Join(work, name+".console")}
	unpack(t, tarball, c.root)
	if err := os.WriteFile(filepath.Join(c.root, "etc/hostname"), []byte(name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(c.log)
	if err != nil {
		t.Fatal(err)
	}
	// --register=no --keep-unit: no systemd-machined (the host's PID 1 is
	// not systemd); --private-network: the container needs no network.
	c.cmd = exec.Command("systemd-nspawn", "--boot", "--register=no", "--keep-unit", "--private-network",
		"--console=pipe", "-D", c.root, "-M", name)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	c.exited = make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(c.poweroff)

	deadline := time.Now().Add(2 * time.Minute)
	for c.leader == 0 {
		// nspawn's child becomes systemd (exec) after a short-lived
		// intermediate process: wait for a child named systemd
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", c.cmd.Process.Pid, c.cmd.Process.Pid)); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if comm, err := os.ReadFile("/proc/" + f + "/comm"); err == nil && strings.TrimSpace(string(comm)) == "systemd" {
					c.leader, _ = strconv.Atoi(f)
				}
			}
		}
		select {
		case <-c.exited:
			b, _ := os.ReadFile(c.log)
			t.Fatalf("systemd-nspawn exited:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no container process")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// systemd is PID 1 inside, and the boot completes
	for {
		st, _ := c.exec("systemctl", "is-system-running")
		st = strings.TrimSpace(st)
		if st == "running" {
			break
		}
		if st == "degraded" {
			out, _ := c.exec("systemctl", "--no-pager", "--failed")
			t.Fatalf("the container booted degraded:\n%s", out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container's systemd is %q after 2 minutes", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if comm := c.out("cat", "/proc/1/comm"); comm != "systemd" {
		t.Fatalf("PID 1 in the container is %q", comm)
	}
	return c
}

func (c *container) poweroff() {
	_, _ = c.exec("systemctl", "poweroff", "--no-block")
	select {
	case <-c.exited:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
	}
}

// exec runs a command inside the container (all its namespaces, as root).
func (c *container) exec(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(c.leader), "-a", "--"}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "SYSTEMD_PAGER=", "HOME=/root"}
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

// inService runs a command in the mount namespace of the service's main
// process (its sandbox: read-only mounts bind even root); pid is the
// container's view of it.
func (c *container) inService(pid string, args ...string) (string, error) {
	return c.exec(append([]string{"nsenter", "-t", pid, "-m", "--"}, args...)...)
}

func (c *container) exec2(args ...string) string {
	out, _ := c.exec(args...)
	return out
}

func (c *container) run(args ...string) error {
	_, err := c.exec(args...)
	return err
}

func (c *container) out(args ...string) string {
	out, _ := c.exec(args...)
	return strings.TrimSpace(out)
}

func (c *container) must(args ...string) {
	c.t.Helper()
	if out, err := c.exec(args...); err != nil {
		c.t.Fatalf("%s: %v\n%s\n%s", strings.Join(args, " "), err, out, c.journal())
	}
}

func (c *container) writeFile(path, content string) {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.root, path), []byte(content), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// editConfig sets keys in /etc/vmpayload/agent.yaml and appends a line.
func (c *container) editConfig(set map[string]string, line string) {
	c.t.Helper()
	p := filepath.Join(c.root, "etc/vmpayload/agent.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		c.t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for k, v := range set {
		found := false
		for i, l := range lines {
			if strings.HasPrefix(l, k+":") {
				lines[i], found = k+": "+v, true
			}
		}
		if !found {
			lines = append(lines, k+": "+v)
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// show returns unit properties of vmpayload.service.
func (c *container) show(props ...string) map[string]string {
	out, _ := c.exec("systemctl", "show", "vmpayload", "-p", strings.Join(props, ","))
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

func (c *container) journal() string {
	out, _ := c.exec("journalctl", "-u", "vmpayload", "--no-pager", "-o", "short-monotonic")
	return out
}

// journalJSON returns the unit's journal entries (string fields only).
func (c *container) journalJSON() []map[string]string {
	out, _ := c.exec("journalctl", "-u", "vmpayload", "-o", "json", "--no-pager")
	var entries []map[string]string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(l), &raw); err != nil {
			c.t.Errorf("journalctl -o json: %v: %s", err, l)
			continue
		}
		e := map[string]string{}
		for k, v := range raw {
			if s, ok := v.(string); ok {
				e[k] = s
			}
		}
		entries = append(entries, e)
	}
	return entries
}

// eventually polls cond for up to 20 s (journald stores entries
// asynchronously); the caller checks the outcome itself.
func eventually(cond func() bool) {
	for deadline := time.Now().Add(20 * time.Second); !cond() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
}

// groupID looks a group up in root's /etc/group.
func groupID(t *testing.T, root, name string) string {
	b, err := os.ReadFile(filepath.Join(root, "etc/group"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Split(l, ":"); len(f) > 2 && f[0] == name {
			return f[2]
		}
	}
	return "none"
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkRPM installs the .rpm into a separate (not booted) Debian root with
// rpm --root: the scriptlets run chrooted there, without systemd.
func checkRPM(t *testing.T, work, tarball, rpmFile string) {
	root := filepath.Join(work, "rpmroot")
	unpack(t, tarball, root)
	// --nodeps: the Debian root has libvirt0, not the libvirt-libs rpm
	out, err := exec.Command("rpm", "--root", root, "--nodeps", "-i", rpmFile).CombinedOutput()
	if err != nil {
		t.Fatalf("rpm --root -i: %v\n%s", err, out)
	}
	// Debian's rpm warns "RPM should not be used directly..." on stderr;
	// anything else is a scriptlet complaining
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.HasPrefix(l, "rpm: ") {
			t.Errorf("rpm -i printed %q", l)
		}
	}
	// files with their modes, as rpm recorded them and as they landed
	if out, err := exec.Command("rpm", "--root", root, "-V", "--nodeps", "vmpayload").CombinedOutput(); err != nil {
		t.Errorf("rpm -V after install: %v\n%s", err, out)
	}
	for path, mode := range map[string]os.FileMode{"usr/bin/vmpayload": 0o755, "usr/sbin/vmpayloadd": 0o755, "etc/vmpayload/agent.yaml": 0o644,
		"etc/vmpayload/secrets": 0o700 | os.ModeDir, "var/spool/vmpayload": 0o700 | os.ModeDir,
		"etc/libvirt/hooks/qemu.d/vmpayload": 0o755, "usr/lib/systemd/system/vmpayload.service": 0o644} {
		st, err := os.Stat(filepath.Join(root, path))
		if err != nil || st.Mode() != mode {
			t.Errorf("/%s: %v %v, want %v", path, st.Mode(), err, mode)
		}
	}
	// %pre made the group in the root's group file
	if b, err := os.ReadFile(filepath.Join(root, "etc/group")); err != nil || !strings.Contains(string(b), "\nvmpayload:") {
		t.Errorf("%%pre did not create the vmpayload group in the root")
	}
	// %post cannot run systemd-tmpfiles without /proc (it skips it); at
	// boot the installed tmpfiles.d file makes the directories, with the
	// group %pre created: run it as boot would, against the root
	if out, err := exec.Command("systemd-tmpfiles", "--root="+root, "--create", filepath.Join(root, "usr/lib/tmpfiles.d/vmpayload.conf")).CombinedOutput(); err != nil {
		t.Errorf("systemd-tmpfiles --root: %v\n%s", err, out)
	}
	st, err := os.Stat(filepath.Join(root, "run/vmpayload"))
	if err != nil || st.Mode().Perm() != 0o750 || fmt.Sprint(st.Sys().(*syscall.Stat_t).Gid) != groupID(t, root, "vmpayload") {
		t.Errorf("/run/vmpayload from tmpfiles.d: %v %v, want 0750 group vmpayload", st, err)
	}
	// an edited config survives an erase as .rpmsave
	p := filepath.Join(root, "etc/vmpayload/agent.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, append(b, "# edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("rpm", "--root", root, "-e", "vmpayload").CombinedOutput(); err != nil {
		t.Errorf("rpm --root -e: %v\n%s", err, out)
	}
	for _, p := range []string{"usr/bin/vmpayload", "usr/sbin/vmpayloadd", "usr/lib/systemd/system/vmpayload.service", "etc/libvirt/hooks/qemu.d/vmpayload", "run/vmpayload"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("/%s is left after rpm -e", p)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "etc/vmpayload/agent.yaml.rpmsave")); err != nil {
		t.Errorf("the edited agent.yaml was not kept as .rpmsave: %v", err)
	}
}
