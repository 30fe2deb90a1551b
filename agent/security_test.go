package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/access"
	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/payload"
	pjob "github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// stuckHost never answers lookups of domain "stuck" (like a libvirtd whose
// call hangs on wedged storage: deaf to ctx, as a C call is).
type stuckHost struct {
	*libvirtx.LibvirtHost
	release chan struct{}
}

func (s *stuckHost) Domain(ctx context.Context, name string) (libvirtx.DomainInfo, error) {
	if name == "stuck" {
		<-s.release
	}
	return s.LibvirtHost.Domain(ctx, name)
}

// TestLibvirtTimeoutFailsJobAndFreesWorker: a libvirt call that never
// answers fails its job once with libvirt_timeout naming the operation, the
// (only) worker goes on with the next job, the connection is reopened and
// /metrics counts it.
func TestLibvirtTimeoutFailsJobAndFreesWorker(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := startAgentWith(t, "", nil, agentSetup{
		wrap: func(lh *libvirtx.LibvirtHost) libvirtx.Host { return &stuckHost{LibvirtHost: lh, release: release} },
		opts: func(o *agent.Options) { o.Workers, o.LibvirtTimeout = 1, 300*time.Millisecond },
	})
	h.drop("t-stuck", map[string]any{"version": 1, "id": "t-stuck", "domain": "stuck", "hostname": "s"})
	r := h.result("t-stuck")
	if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeLibvirtTimeout ||
		!strings.Contains(r.Error.Message, "looking up domain stuck") {
		t.Fatalf("result = %+v (error %+v); want failed with libvirt_timeout naming the lookup", r, r.Error)
	}
	if r.Attempts != 1 {
		t.Errorf("attempts = %d; a timeout is not retried", r.Attempts)
	}
	// The one worker is free: the next job runs (after the reconnection).
	waitFor(t, "a reconnection", func() bool { return h.host.Reconnects() >= 1 })
	if _, err := h.host.DefineXML(context.Background(), domainXML("t-stopped", "pc", "")); err != nil {
		t.Fatal(err)
	}
	h.drop("t-next", map[string]any{"version": 1, "id": "t-next", "domain": "t-stopped", "hostname": "n", "action": "attach"})
	if r := h.result("t-next"); r.State != result.StateDone {
		t.Fatalf("next job: %+v %+v", r, r.Error)
	}
	var b bytes.Buffer
	if _, err := h.met.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `vmpayload_libvirt_timeouts_total{call="domain"} 1`) {
		t.Errorf("metrics lack the timeout:\n%s", b.String())
	}
	// Reported once: failed/ holds the one result, done/ none.
	if _, err := os.Stat(h.spool.ResultPath("t-stuck", result.StateDone)); err == nil {
		t.Error("the timed-out job also has a done result")
	}
}

// testUser is a throwaway system user created for a test.
type testUser struct {
	name     string
	uid, gid int
}

// addGroup and addUser create throwaway groups and users (removed at the
// end of the test); they need root and useradd.
// addAccount runs `add args... name` (groupadd, useradd), removes the
// account with del when t ends and returns what lookup finds for name.
func addAccount[T any](t *testing.T, add, del string, lookup func(string) (T, error), name string, args ...string) T {
	t.Helper()
	if out, err := exec.Command(add, append(args, name)...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", add, name, err, out)
	}
	t.Cleanup(func() { exec.Command(del, name).Run() })
	a, err := lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func addGroup(t *testing.T, name string) int {
	t.Helper()
	g := addAccount(t, "groupadd", "groupdel", user.LookupGroup, name)
	gid, _ := strconv.Atoi(g.Gid)
	return gid
}

func addUser(t *testing.T, name string, groups ...string) testUser {
	t.Helper()
	args := []string{"--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group"}
	if len(groups) > 0 {
		args = append(args, "--groups", strings.Join(groups, ","))
	}
	u := addAccount(t, "useradd", "userdel", user.Lookup, name, args...)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return testUser{name, uid, gid}
}

// postAs posts body to the agent's socket as user u (runuser + curl, a real
// separate process with u's credentials and groups) and returns the HTTP
// status and the answer; status 0 when the socket refused the connection.
func postAs(t *testing.T, u testUser, sock, body string) (int, map[string]any) {
	t.Helper()
	cmd := exec.Command("runuser", "-u", u.name, "--", "curl", "-sS", "--unix-socket", sock,
		"-H", "Content-Type: application/json", "--data-binary", "@-", "-w", "\n%{http_code}", "http://agent/v1/jobs")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.Output()
	if err != nil {
		return 0, nil
	}
	s := strings.TrimSpace(string(out))
	i := strings.LastIndex(s, "\n")
	code, _ := strconv.Atoi(s[i+1:])
	var m map[string]any
	if err := json.Unmarshal([]byte(s[:max(i, 0)]), &m); err != nil {
		t.Fatalf("answer to %s: %q: %v", u.name, s, err)
	}
	return code, m
}

// postDone posts body as u to the agent at sock, wants it accepted, and
// waits (as root) for the result of job id, which must be done.
func postDone(t *testing.T, u testUser, sock string, root *http.Client, id, body string) result.Result {
	t.Helper()
	code, ans := postAs(t, u, sock, body)
	if code != http.StatusAccepted {
		t.Fatalf("status %d: %v; want 202", code, ans)
	}
	r := waitJob(t, root, id)
	if r.State != result.StateDone {
		t.Fatalf("%+v %+v; want done", r, r.Error)
	}
	return r
}

// waitJob waits for job id through the API (as root).
func waitJob(t *testing.T, c *http.Client, id string) result.Result {
	t.Helper()
	resp, err := c.Get("http://x/v1/jobs/" + id + "?wait=60s")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r result.Result
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if !r.State.Final() {
		t.Fatalf("job %s still %s", id, r.State)
	}
	return r
}

// userTestSuffix skips t unless it runs as root and tools (those that
// make and act as users) are installed, and returns a random suffix for
// the users' and groups' names.
func userTestSuffix(t *testing.T, tools ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create users")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	return testenv.RandHex(t, 3)
}

// TestAccessAsRealUsers runs API clients as real non-root users against the
// agent's socket on the test driver: a plain member of the socket group may
// attach payloads to existing domains but every privileged field is refused
// (403 naming it, nothing defined), a member of admin_group and root may use
// them, a user outside the socket group cannot connect, a spool file's
// owner is its submitter, and every result records who asked.
func TestAccessAsRealUsers(t *testing.T) {
	sfx := userTestSuffix(t, "useradd", "groupadd", "runuser", "curl")
	sockGroup, adminGroup := "vmpxs"+sfx, "vmpxa"+sfx
	sockGID, adminGID := addGroup(t, sockGroup), addGroup(t, adminGroup)
	plain := addUser(t, "vmpxp"+sfx, sockGroup)
	admin := addUser(t, "vmpxa"+sfx+"u", sockGroup, adminGroup)
	outsider := addUser(t, "vmpxo"+sfx)

	sockDir := testenv.WorkDir(t, "vmpx-sec-")
	seeds := filepath.Join(sockDir, "seeds")
	if err := os.Mkdir(seeds, 0o755); err != nil {
		t.Fatal(err)
	}
	rd, err := payloadtest.Render(&pjob.Job{Version: 1, Domain: "existing", Hostname: "prebuilt"}, "", payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seed := filepath.Join(seeds, "seed.iso")
	if _, err := rd.Write(context.Background(), seed, payload.Options{GID: -1}); err != nil {
		t.Fatal(err)
	}
	h := startAgentWith(t, "", nil, agentSetup{sock: filepath.Join(sockDir, "agent.sock"), sockGID: sockGID,
		opts: func(o *agent.Options) { o.Policy, o.PrebuiltDirs = access.NewPolicy(adminGID), []string{seeds} }})
	root := client.New(h.sock).HTTP()

	xmlJob := func(id, dom string) string {
		return fmt.Sprintf(`{"version":1,"id":%q,"domain":%q,"hostname":"h","action":"attach","domain_xml":%q}`, id, dom, domainXML(dom, "pc", ""))
	}
	img := seed
	imgJob := func(id string) string {
		return fmt.Sprintf(`{"version":1,"id":%q,"domain":"existing","prebuilt_image":%q}`, id, img)
	}
	// A stopped domain root defined: plain members attach payloads to it.
	if _, err := h.host.DefineXML(context.Background(), domainXML("existing", "pc", "")); err != nil {
		t.Fatal(err)
	}
	payloadJob := func(id string) string {
		return fmt.Sprintf(`{"version":1,"id":%q,"domain":"existing","hostname":"h","action":"attach"}`, id)
	}

	refusals := []struct {
		name, body, field string
	}{
		{"domain_xml", xmlJob("p-xml", "plain-defined"), "domain_xml"},
		{"prebuilt_image", imgJob("p-img"), "prebuilt_image"},
	}
	for _, tt := range refusals {
		t.Run("plain member refused "+tt.name, func(t *testing.T) {
			code, ans := postAs(t, plain, h.sock, tt.body)
			errs, _ := ans["errors"].([]any)
			if code != http.StatusForbidden || len(errs) != 1 {
				t.Fatalf("status %d, answer %v; want 403 with one error", code, ans)
			}
			fe := errs[0].(map[string]any)
			if fe["field"] != tt.field || fe["code"] != "forbidden" || !strings.Contains(fe["message"].(string), plain.name) {
				t.Errorf("error %v; want field %s, code forbidden, naming %s", fe, tt.field, plain.name)
			}
		})
	}
	if _, err := h.host.Domain(context.Background(), "plain-defined"); !libvirtx.IsNotFound(err) {
		t.Errorf("a refused domain_xml was defined (lookup: %v)", err)
	}

	checkSubmitter := func(t *testing.T, r result.Result, u testUser, via string) {
		t.Helper()
		s := r.Submitter
		if s == nil || s.UID != uint32(u.uid) || s.User != u.name || s.Via != via || (via == access.ViaPeerCred && s.PID <= 0) {
			t.Errorf("submitter %+v; want %s (uid %d) via %s", s, u.name, u.uid, via)
		}
	}
	t.Run("plain member attaches a payload", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://x/v1/events", nil)
		evResp, err := root.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer evResp.Body.Close()
		r := postDone(t, plain, h.sock, root, "p-payload", payloadJob("p-payload"))
		checkSubmitter(t, r, plain, access.ViaPeerCred)
		if fr, ok := h.spool.Lookup("p-payload"); !ok || fr.Submitter == nil || fr.Submitter.UID != uint32(plain.uid) {
			t.Errorf("result file's submitter %+v; want uid %d", fr.Submitter, plain.uid)
		}
		// Every job event carries the submitter.
		dec := json.NewDecoder(evResp.Body)
		seen := map[string]bool{}
		for !seen["done"] {
			var ev agent.Event
			if err := dec.Decode(&ev); err != nil {
				t.Fatalf("reading events (saw %v): %v", seen, err)
			}
			if ev.Kind != "job" || ev.ID != "p-payload" {
				continue
			}
			seen[ev.Type] = true
			if ev.Submitter == nil || ev.Submitter.UID != uint32(plain.uid) || ev.Submitter.User != plain.name {
				t.Errorf("%s event submitter %+v; want %s", ev.Type, ev.Submitter, plain.name)
			}
		}
	})
	t.Run("admin group member defines", func(t *testing.T) {
		r := postDone(t, admin, h.sock, root, "a-xml", xmlJob("a-xml", "admin-defined"))
		checkSubmitter(t, r, admin, access.ViaPeerCred)
	})
	t.Run("admin group member attaches a prebuilt image", func(t *testing.T) {
		r := postDone(t, admin, h.sock, root, "a-img", strings.Replace(imgJob("a-img"), `"domain"`, `"action":"attach","domain"`, 1))
		if r.Payload == nil || !r.Payload.Prebuilt {
			t.Fatalf("%+v %+v", r, r.Error)
		}
		checkSubmitter(t, r, admin, access.ViaPeerCred)
	})
	t.Run("root defines", func(t *testing.T) {
		code, _, ans := postJob(t, root, xmlJob("r-xml", "root-defined"))
		if code != http.StatusAccepted {
			t.Fatalf("status %d: %v", code, ans)
		}
		if r := waitJob(t, root, "r-xml"); r.State != result.StateDone || r.Submitter == nil || r.Submitter.UID != 0 {
			t.Fatalf("%+v %+v", r, r.Error)
		}
	})
	t.Run("outsider cannot connect", func(t *testing.T) {
		if code, ans := postAs(t, outsider, h.sock, payloadJob("o-payload")); code != 0 {
			t.Errorf("a user outside socket_group got status %d: %v", code, ans)
		}
	})
	t.Run("spool file owner is the submitter", func(t *testing.T) {
		// The spool's incoming/ is root's (0700): root drops the file and
		// gives it to the plain user, as if the user had written it.
		b := []byte(xmlJob("s-xml", "spool-defined"))
		tmp := filepath.Join(h.spool.Dir(spool.Incoming), ".s-xml.tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(tmp, plain.uid, plain.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(h.spool.Dir(spool.Incoming), "s-xml.json")); err != nil {
			t.Fatal(err)
		}
		r := h.result("s-xml")
		if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeForbidden || r.Error.Field != "domain_xml" {
			t.Fatalf("result %+v %+v; want failed forbidden on domain_xml", r, r.Error)
		}
		checkSubmitter(t, r, plain, access.ViaFileOwner)
		if _, err := h.host.Domain(context.Background(), "spool-defined"); !libvirtx.IsNotFound(err) {
			t.Errorf("a refused spool domain_xml was defined (lookup: %v)", err)
		}
	})
}

// runAs runs a shell command as user u (umask 077) and returns its output
// and error.
func runAs(u testUser, script string) (string, error) {
	out, err := exec.Command("runuser", "-u", u.name, "--", "sh", "-c", "umask 077; "+script).CombinedOutput()
	return string(out), err
}

// TestSpoolGroupAsRealUsers: members of spool_group drop jobs as the spool
// protocol says and read their own results by name; they cannot list the
// spool, read, replace or delete another member's jobs or results, and
// symlinks and hard links are refused.
func TestSpoolGroupAsRealUsers(t *testing.T) {
	sfx := userTestSuffix(t, "useradd", "groupadd", "runuser")
	group := "vmpxg" + sfx
	gid := addGroup(t, group)
	alice, bob := addUser(t, "vmpxa"+sfx, group), addUser(t, "vmpxb"+sfx, group)
	top := testenv.WorkDir(t, "vmpx-spool-")
	sp := filepath.Join(top, "spool")
	h := startAgentWith(t, "", nil, agentSetup{spool: sp,
		opts: func(o *agent.Options) { o.SpoolGroup, o.HasSpoolGroup = gid, true }})
	if _, err := h.host.DefineXML(context.Background(), domainXML("spooled", "pc", "")); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(sp, spool.Incoming)
	dropAs := func(u testUser, name, body string) {
		t.Helper()
		script := fmt.Sprintf("cat > %s/.%s.tmp && mv %s/.%s.tmp %s/%s.json", in, name, in, name, in, name)
		cmd := exec.Command("runuser", "-u", u.name, "--", "sh", "-c", "umask 077; "+script)
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s dropping %s: %v: %s", u.name, name, err, out)
		}
	}
	readAs := func(u testUser, p string) (result.Result, error) {
		out, err := runAs(u, "cat "+p)
		if err != nil {
			return result.Result{}, fmt.Errorf("%s: %w", out, err)
		}
		var r result.Result
		return r, json.Unmarshal([]byte(out), &r)
	}
	payloadJob := func(id string) string {
		return fmt.Sprintf(`{"version":1,"id":%q,"domain":"spooled","hostname":"h","action":"attach"}`, id)
	}

	dropAs(alice, "a1", payloadJob("a1"))
	if r := h.result("a1"); r.State != result.StateDone {
		t.Fatalf("alice's job: %+v %+v", r, r.Error)
	}
	donePath := h.spool.ResultPath("a1", result.StateDone)
	r, err := readAs(alice, donePath)
	if err != nil || r.Submitter == nil || r.Submitter.UID != uint32(alice.uid) || r.Submitter.Via != access.ViaFileOwner {
		t.Fatalf("alice reading her result: %+v, %v", r.Submitter, err)
	}
	if out, err := runAs(bob, "cat "+donePath); err == nil {
		t.Errorf("bob read alice's result: %s", out)
	}
	for _, d := range []string{spool.Incoming, spool.Done, spool.Failed, spool.Processing} {
		if out, err := runAs(bob, "ls "+filepath.Join(sp, d)); err == nil {
			t.Errorf("bob listed %s: %s", d, out)
		}
	}
	// bob reuses alice's id: his job is refused under his own result name,
	// alice's result stays.
	before, _ := os.ReadFile(donePath)
	dropAs(bob, "a1", payloadJob("a1"))
	foreign := h.spool.ForeignResultPath("a1", uint32(bob.uid))
	waitFor(t, "bob's refusal", func() bool { _, err := os.Stat(foreign); return err == nil })
	if r, err := readAs(bob, foreign); err != nil || r.Error == nil || r.Error.Code != result.CodeForbidden || r.Error.Field != "id" {
		t.Errorf("bob's result %+v, %v; want forbidden on id", r.Error, err)
	}
	if after, _ := os.ReadFile(donePath); !bytes.Equal(before, after) {
		t.Error("bob's job replaced alice's result")
	}
	// bob can neither delete nor replace a file alice is still writing.
	if out, err := runAs(alice, fmt.Sprintf("echo '{}' > %s/.wait.tmp", in)); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if out, err := runAs(bob, fmt.Sprintf("rm -f %s/.wait.tmp", in)); err == nil {
		if _, serr := os.Stat(filepath.Join(in, ".wait.tmp")); serr != nil {
			t.Errorf("bob deleted alice's file: %s", out)
		}
	}
	if out, err := runAs(bob, fmt.Sprintf("echo x > %s/.b.tmp && mv -f %s/.b.tmp %s/.wait.tmp", in, in, in)); err == nil {
		t.Errorf("bob replaced alice's file: %s", out)
	}
	// Links are refused.
	links := []struct{ name, id, script, want string }{
		{"symlink", "sl", fmt.Sprintf("ln -s /etc/shadow %s/sl.json", in), "symlink"},
		{"hardlink", "hl", fmt.Sprintf("echo '%s' > %s/.hl.tmp && ln %s/.hl.tmp %s/hl.json", payloadJob("hl"), in, in, in), "hard link"},
	}
	for _, l := range links {
		if out, err := runAs(alice, l.script); err != nil {
			t.Fatalf("%s: %s: %v", l.name, out, err)
		}
		r := h.result(l.id)
		if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeBadFile || !strings.Contains(r.Error.Message, l.want) {
			t.Errorf("%s: %+v; want bad_file naming %q", l.name, r.Error, l.want)
		}
		if r.Submitter == nil || r.Submitter.UID != uint32(alice.uid) {
			t.Errorf("%s: submitter %+v; want alice", l.name, r.Submitter)
		}
	}
}

// onlyCaps makes a run its binary with no capabilities but caps (as
// setpriv's --bounding-set takes them: "+chown,+dac_read_search"), none of
// them inheritable, as a packaged unit that bounds them would.
// capsAgent makes the group group with one member (group+"u") and an agent
// on the test driver that gives the group to groupFlag (--socket-group,
// --spool-group), started under only the capabilities caps (onlyCaps).
func capsAgent(t *testing.T, group, groupFlag, caps string) (*agentProc, testUser) {
	t.Helper()
	addGroup(t, group)
	m := addUser(t, group+"u", group)
	a := newAgent(t, "test:///default", groupFlag, group)
	a.onlyCaps(t, caps)
	a.start()
	return a, m
}

func (a *agentProc) onlyCaps(t *testing.T, caps string) {
	t.Helper()
	wrapper := filepath.Join(a.Dir, "caps.sh")
	script := fmt.Sprintf("#!/bin/sh\nexec setpriv --bounding-set -all,%s --inh-caps -all -- %s \"$@\"\n", caps, a.Bin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	a.Bin = wrapper
}

// TestAgentWithOnlyCapChown runs the agent binary with the packaged unit's
// capabilities (CAP_CHOWN only; setpriv drops the rest from the bounding
// set): jobs the API queues for a plain user (files it gives to the user)
// are still read and run, and spool_group, which needs CAP_DAC_READ_SEARCH,
// refuses to start with a message saying so.
func TestAgentWithOnlyCapChown(t *testing.T) {
	sfx := userTestSuffix(t, "useradd", "groupadd", "runuser", "curl", "setpriv")
	group := "vmpxc" + sfx
	a, plain := capsAgent(t, group, "--socket-group", "+chown")

	dom := "vmpx-capchown-" + sfx
	def := fmt.Sprintf(`{"version":1,"id":"cc-def","domain":%q,"hostname":"h","action":"attach","domain_xml":%q}`, dom, domainXML(dom, "pc", ""))
	if _, _, err := a.Client().Submit(context.Background(), []byte(def)); err != nil {
		t.Fatal(err)
	}
	mustDone(t, a.result("cc-def", ""))

	body := fmt.Sprintf(`{"version":1,"id":"cc-plain","domain":%q,"hostname":"p","action":"attach"}`, dom)
	if code, ans := postAs(t, plain, a.Socket, body); code != http.StatusAccepted {
		t.Fatalf("status %d %v", code, ans)
	}
	r := a.result("cc-plain", "")
	mustDone(t, r)
	if r.Submitter == nil || r.Submitter.UID != uint32(plain.uid) {
		t.Errorf("submitter %+v; want %s", r.Submitter, plain.name)
	}

	dir := t.TempDir()
	cmd := exec.Command(a.Bin, "agent", "--config", "", "--libvirt-uri", "test:///default", "--spool-dir", filepath.Join(dir, "spool"),
		"--payload-dir", filepath.Join(dir, "payload"), "--socket", filepath.Join(dir, "s.sock"), "--spool-group", group)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "CAP_DAC_READ_SEARCH") {
		t.Errorf("agent with spool_group and CAP_CHOWN only: %v\n%s\nwant a refusal naming CAP_DAC_READ_SEARCH", err, out)
	}
}
