package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// memberAgent runs the agent on the test driver with a socket and a spool
// that the members of a throwaway group (in both socket_group and
// spool_group) use, as on a shared host, and returns it with one member.
// The domain "shared" exists (stopped) for the members' attach jobs.
func memberAgent(t *testing.T, opts func(*agent.Options), names ...string) (*harness, []testUser, string) {
	t.Helper()
	sfx := userTestSuffix(t, "useradd", "groupadd", "runuser", "curl")
	group := "spoolg" + sfx
	gid := addGroup(t, group)
	var users []testUser
	for _, n := range names {
		users = append(users, addUser(t, "spool"+n+sfx, group))
	}
	top := testenv.WorkDir(t, "spool-jam-")
	sp := filepath.Join(top, "spool")
	h := startAgentWith(t, "", nil, agentSetup{spool: sp, sock: filepath.Join(top, "agent.sock"), sockGID: gid,
		opts: func(o *agent.Options) {
			o.SpoolGroup, o.HasSpoolGroup = gid, true
			o.RescanInterval = 100 * time.Millisecond
			if opts != nil {
				opts(o)
			}
		}})
	if _, err := h.host.DefineXML(context.Background(), domainXML("shared", "pc", "")); err != nil {
		t.Fatal(err)
	}
	return h, users, filepath.Join(sp, spool.Incoming)
}

// sharedJob attaches a payload to the domain "shared".
func sharedJob(id string) string {
	return fmt.Sprintf(`{"version":1,"id":%q,"domain":"shared","hostname":"h","action":"attach"}`, id)
}

// healthQueued returns /healthz's "queued".
func healthQueued(t *testing.T, c *http.Client) int {
	t.Helper()
	resp, err := c.Get("http://x/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	q, _ := h["queued"].(float64)
	return int(q)
}

// TestSpoolEntriesThatAreNotFilesBlockNothing: a member of spool_group puts
// a directory with a file in it, a FIFO and a symlink into incoming/ under
// job names (root adds a socket); each fails with bad_file naming its type,
// its submitter is the member, it is moved aside into rejected/ (the
// directory with its content), and the member's next job is done. Before,
// the directory could not be removed from processing/ and held back every
// later result for good.
func TestSpoolEntriesThatAreNotFilesBlockNothing(t *testing.T) {
	h, users, in := memberAgent(t, nil, "m")
	m := users[0]
	script := fmt.Sprintf("mkdir %[1]s/.d.tmp && echo x > %[1]s/.d.tmp/inside && mv %[1]s/.d.tmp %[1]s/jam-dir.json && "+
		"mkfifo %[1]s/jam-fifo.json && ln -s /etc/shadow %[1]s/jam-link.json", in)
	if out, err := runAs(m, script); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	testenv.ListenUnix(t, filepath.Join(in, "jam-sock.json"))
	if out, err := runAs(m, fmt.Sprintf("echo '%s' > %s/.ok.tmp && mv %s/.ok.tmp %s/jam-after.json", sharedJob("jam-after"), in, in, in)); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	for _, tt := range []struct {
		id, kind string
		uid      int
	}{
		{"jam-dir", "is a directory", m.uid},
		{"jam-fifo", "is a named pipe (FIFO)", m.uid},
		{"jam-link", "is a symlink", m.uid},
		{"jam-sock", "is a socket", 0},
	} {
		r := h.result(tt.id)
		want := "incoming/" + tt.id + ".json " + tt.kind
		if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeBadFile || !strings.Contains(r.Error.Message, want) {
			t.Errorf("%s: %s %+v; want failed bad_file saying %q", tt.id, r.State, r.Error, want)
		}
		if r.Submitter == nil || r.Submitter.UID != uint32(tt.uid) {
			t.Errorf("%s: submitter %+v; want uid %d", tt.id, r.Submitter, tt.uid)
		}
	}
	if r := h.result("jam-after"); r.State != result.StateDone {
		t.Fatalf("the job after them: %s %+v", r.State, r.Error)
	}
	ents, err := os.ReadDir(h.spool.Dir(spool.Rejected))
	if err != nil {
		t.Fatal(err)
	}
	var dir string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "jam-dir.json.") {
			dir = filepath.Join(h.spool.Dir(spool.Rejected), e.Name())
		}
	}
	if len(ents) != 4 || dir == "" {
		t.Fatalf("rejected/ holds %d entries (%v), want the 4, among them jam-dir.json.*", len(ents), ents)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "inside")); err != nil || string(b) != "x\n" {
		t.Errorf("the directory's content: %q %v", b, err)
	}
	if st, err := os.Lstat(dir); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(m.uid) {
		t.Errorf("the moved directory is no longer its writer's: %v", err)
	}
	for _, sub := range []string{spool.Incoming, spool.Processing} {
		waitFor(t, sub+"/ empty", func() bool { e, _ := os.ReadDir(h.spool.Dir(sub)); return len(e) == 0 })
	}
	c := client.New(h.sock).HTTP()
	waitFor(t, "no result pending", func() bool { return healthQueued(t, c) == 0 && h.agent.Health()["results_pending"] == 0 })
}

// TestUnwritableResultHoldsBackNoOther: a job whose result cannot be
// written (done/ID.json is a directory with a file in it) is retried, while
// the jobs after it get their results; once the obstacle is gone its result
// is written too. Before, results were written strictly in order and every
// later one waited behind it.
func TestUnwritableResultHoldsBackNoOther(t *testing.T) {
	h := startAgent(t, "", nil)
	if _, err := h.host.DefineXML(context.Background(), domainXML("uw", "pc", "")); err != nil {
		t.Fatal(err)
	}
	block := h.spool.ResultPath("uw-stuck", result.StateDone)
	if err := os.MkdirAll(filepath.Join(block, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	job := func(id string) map[string]any {
		return map[string]any{"version": 1, "id": id, "domain": "uw", "hostname": "h", "action": "attach"}
	}
	h.drop("uw-stuck", job("uw-stuck"))
	waitFor(t, "the stuck result pending", func() bool { return h.agent.Health()["results_pending"] == 1 })
	h.drop("uw-after", job("uw-after"))
	if r := h.result("uw-after"); r.State != result.StateDone {
		t.Fatalf("the job after the stuck one: %s %+v", r.State, r.Error)
	}
	if n := h.agent.Health()["results_pending"]; n != 1 {
		t.Errorf("results_pending %v, want 1 (the stuck one)", n)
	}
	if err := os.RemoveAll(block); err != nil {
		t.Fatal(err)
	}
	if r := h.result("uw-stuck"); r.State != result.StateDone {
		t.Fatalf("the stuck job once its result could be written: %s %+v", r.State, r.Error)
	}
}

// TestRenamedAPIJobFreesItsQueuePlace: with queue_limit 2 and intake unable
// to claim (processing/ replaced by a file), a member's two API jobs wait in
// incoming/ and fill the queue (/healthz says 2, a third POST gets 503).
// The member renames one and removes the other: both places are free again
// (/healthz 0), the member's next POST is accepted, and once processing/ is
// back the renamed file runs as the member's spool job. Before, the count
// only went down when intake claimed the API's own file: renames made every
// later POST fail "queue full" while /healthz said 0.
func TestRenamedAPIJobFreesItsQueuePlace(t *testing.T) {
	h, users, in := memberAgent(t, func(o *agent.Options) { o.QueueLimit = 2 }, "q")
	m := users[0]
	c := client.New(h.sock).HTTP()
	proc := h.spool.Dir(spool.Processing)
	if err := os.Remove(proc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(proc, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"q-1", "q-2"} {
		if code, ans := postAs(t, m, h.sock, sharedJob(id)); code != http.StatusAccepted {
			t.Fatalf("POST %s: %d %v", id, code, ans)
		}
	}
	if q := healthQueued(t, c); q != 2 {
		t.Errorf("/healthz queued %d with two API jobs waiting in incoming/, want 2 (what queue_limit counts)", q)
	}
	if code, ans := postAs(t, m, h.sock, sharedJob("q-3")); code != http.StatusServiceUnavailable {
		t.Fatalf("POST beyond queue_limit: %d %v, want 503", code, ans)
	}
	// The member's own files: one renamed (to another job name), one removed.
	if out, err := runAs(m, fmt.Sprintf("mv %[1]s/q-1.json %[1]s/q-1-renamed.json && rm %[1]s/q-2.json", in)); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	waitFor(t, "/healthz queued 0", func() bool { return healthQueued(t, c) == 0 })
	if code, ans := postAs(t, m, h.sock, sharedJob("q-3")); code != http.StatusAccepted {
		t.Fatalf("POST after the renames: %d %v, want 202", code, ans)
	}
	if err := os.Remove(proc); err != nil {
		t.Fatal(err)
	}
	if r := h.result("q-3"); r.State != result.StateDone || r.Source != result.SourceSocket {
		t.Fatalf("q-3: %s %s %+v", r.State, r.Source, r.Error)
	}
	// The renamed file is the member's spool job, with the id it carries.
	if r := h.result("q-1"); r.State != result.StateDone || r.Source != result.SourceSpool || r.Submitter == nil || r.Submitter.UID != uint32(m.uid) {
		t.Fatalf("q-1 (renamed): %s %s %+v %+v", r.State, r.Source, r.Submitter, r.Error)
	}
	waitFor(t, "/healthz queued 0 again", func() bool { return healthQueued(t, c) == 0 })
}

// TestJobIDsBelongToTheirSubmitter: a member's finished job id cannot be
// taken by another member: through the API it is refused with 409 naming
// the field id and quoting it (root's id too), through the spool it fails
// forbidden on id with the result in failed/ID.uidUID.json; in both cases
// GET /v1/jobs/ID still answers the first member's result, and its files
// are unchanged. The owner may run its finished id again, and an identical
// retry of its job while it is still queued is answered with that job.
func TestJobIDsBelongToTheirSubmitter(t *testing.T) {
	h, users, in := memberAgent(t, nil, "a", "b")
	alice, bob := users[0], users[1]
	root := client.New(h.sock).HTTP()
	if code, ans := postAs(t, alice, h.sock, sharedJob("own-1")); code != http.StatusAccepted {
		t.Fatalf("alice: %d %v", code, ans)
	}
	first := waitJob(t, root, "own-1")
	if first.State != result.StateDone || first.Submitter == nil || first.Submitter.UID != uint32(alice.uid) {
		t.Fatalf("alice's job: %s %+v %+v", first.State, first.Submitter, first.Error)
	}
	donePath := h.spool.ResultPath("own-1", result.StateDone)
	before, err := os.ReadFile(donePath)
	if err != nil {
		t.Fatal(err)
	}
	code, ans := postAs(t, bob, h.sock, sharedJob("own-1"))
	errs, _ := ans["errors"].([]any)
	if code != http.StatusConflict || len(errs) != 1 {
		t.Fatalf("bob reusing alice's id: %d %v; want 409 with one field error", code, ans)
	}
	if fe := errs[0].(map[string]any); fe["field"] != "id" || !strings.Contains(fe["message"].(string), `"own-1"`) {
		t.Errorf("bob's field error %v; want field id quoting the id", fe)
	}
	// root's job id too (the report: a member's failure replaced
	// GET /v1/jobs/root-define).
	if code, _, ans := postJob(t, root, sharedJob("root-own")); code != http.StatusAccepted {
		t.Fatalf("root: %d %v", code, ans)
	}
	if r := waitJob(t, root, "root-own"); r.State != result.StateDone {
		t.Fatalf("root's job: %s %+v", r.State, r.Error)
	}
	if code, ans := postAs(t, bob, h.sock, sharedJob("root-own")); code != http.StatusConflict {
		t.Errorf("bob reusing root's id: %d %v; want 409", code, ans)
	}
	// Through the spool: bob's file carries alice's id.
	if out, err := runAs(bob, fmt.Sprintf("echo '%s' > %[2]s/.b.tmp && mv %[2]s/.b.tmp %[2]s/bob-takes.json", sharedJob("own-1"), in)); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	foreign := h.spool.ForeignResultPath("own-1", uint32(bob.uid))
	waitFor(t, "bob's refusal", func() bool { _, err := os.Stat(foreign); return err == nil })
	b, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}
	var fr result.Result
	if err := json.Unmarshal(b, &fr); err != nil || fr.Error == nil || fr.Error.Code != result.CodeForbidden || fr.Error.Field != "id" {
		t.Errorf("bob's spool job: %+v %v; want forbidden on id", fr.Error, err)
	}
	if r := waitJob(t, root, "own-1"); r.State != result.StateDone || r.Submitter == nil || r.Submitter.UID != uint32(alice.uid) {
		t.Errorf("GET /v1/jobs/own-1 after bob's attempts: %s %+v %+v; want alice's done result", r.State, r.Submitter, r.Error)
	}
	if after, _ := os.ReadFile(donePath); string(after) != string(before) {
		t.Error("alice's result file changed")
	}
	// alice may run her finished id again (as before).
	if code, ans := postAs(t, alice, h.sock, sharedJob("own-1")); code != http.StatusAccepted {
		t.Fatalf("alice again: %d %v", code, ans)
	}
	if r := waitJob(t, root, "own-1"); r.State != result.StateDone || r.Submitter.UID != uint32(alice.uid) {
		t.Fatalf("alice's second run: %s %+v", r.State, r.Error)
	}
}

// TestResultRetention: an agent with result_retention_count 2 and
// result_retention_age 1h removes at start-up a result written two hours
// before, and at its rescans the oldest results beyond two; the newest two
// stay readable through the API.
func TestResultRetention(t *testing.T) {
	sp := filepath.Join(t.TempDir(), "spool")
	done := filepath.Join(sp, spool.Done)
	if err := os.MkdirAll(done, 0o700); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(done, "ret-old.json")
	if err := os.WriteFile(old, []byte(`{"id":"ret-old","state":"done"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, at, at); err != nil {
		t.Fatal(err)
	}
	h := startAgentWith(t, "", nil, agentSetup{spool: sp, opts: func(o *agent.Options) {
		o.ResultRetention = spool.Retention{MaxCount: 2, MaxAge: time.Hour}
	}})
	waitFor(t, "the old result pruned at start-up", func() bool { _, err := os.Stat(old); return os.IsNotExist(err) })
	if _, err := h.host.DefineXML(context.Background(), domainXML("ret", "pc", "")); err != nil {
		t.Fatal(err)
	}
	ids := []string{"ret-1", "ret-2", "ret-3", "ret-4"}
	for _, id := range ids {
		h.drop(id, map[string]any{"version": 1, "id": id, "domain": "ret", "hostname": "h", "action": "attach"})
		if r := h.result(id); r.State != result.StateDone {
			t.Fatalf("%s: %s %+v", id, r.State, r.Error)
		}
	}
	waitFor(t, "done/ down to 2 results", func() bool {
		e, _ := os.ReadDir(done)
		return len(e) == 2
	})
	for _, id := range ids[2:] {
		if _, err := os.Stat(h.spool.ResultPath(id, result.StateDone)); err != nil {
			t.Errorf("the newest result %s was removed: %v", id, err)
		}
	}
	if _, ok := h.agent.Job("ret-4"); !ok {
		t.Error("ret-4 not found")
	}
}

// TestMemberDirectoryMovedAsideWithPackagedCaps runs the agent binary with
// the packaged unit's capabilities plus the spool_group drop-in's
// (CAP_CHOWN, CAP_DAC_READ_SEARCH; no CAP_DAC_OVERRIDE): a member's mode-0700
// directory with a file in it, renamed into incoming/ as a job, cannot be
// moved to another directory by such an agent without taking it over. It
// still fails with bad_file naming the type, lands in rejected/ with its
// content and its owner, and the member's next job gets its result.
func TestMemberDirectoryMovedAsideWithPackagedCaps(t *testing.T) {
	sfx := userTestSuffix(t, "useradd", "groupadd", "runuser", "setpriv")
	a, m := capsAgent(t, "spoolc"+sfx, "--spool-group", "+chown,+dac_read_search")
	in := filepath.Join(a.SpoolDir, spool.Incoming)
	if out, err := runAs(m, fmt.Sprintf("mkdir %[1]s/.d.tmp && echo x > %[1]s/.d.tmp/inside && chmod 0700 %[1]s/.d.tmp && mv %[1]s/.d.tmp %[1]s/cap-dir.json", in)); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	r := a.result("cap-dir", "")
	if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeBadFile || !strings.Contains(r.Error.Message, "is a directory") {
		t.Fatalf("cap-dir: %s %+v; want failed bad_file naming a directory", r.State, r.Error)
	}
	job := `{"version":1,"id":"cap-after","domain":"no-such-domain-spoolc","hostname":"h","action":"attach"}`
	if out, err := runAs(m, fmt.Sprintf("echo '%s' > %[2]s/.a.tmp && mv %[2]s/.a.tmp %[2]s/cap-after.json", job, in)); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if r := a.result("cap-after", ""); !r.State.Final() {
		t.Fatalf("cap-after: %s", r.State)
	}
	rej := filepath.Join(a.SpoolDir, spool.Rejected)
	ents, err := os.ReadDir(rej)
	if err != nil || len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), "cap-dir.json.") {
		t.Fatalf("rejected/: %v %v; want the directory", ents, err)
	}
	p := filepath.Join(rej, ents[0].Name())
	if st, err := os.Lstat(p); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(m.uid) || st.Mode().Perm() != 0o700 {
		t.Errorf("the moved directory: %v %v; want the member's, 0700", st, err)
	}
	if b, err := os.ReadFile(filepath.Join(p, "inside")); err != nil || string(b) != "x\n" {
		t.Errorf("its content: %q %v", b, err)
	}
}

// TestIdenticalRetryOfLiveJob: while a job is queued or running, an
// identical POST of it (same client, same body: a retry after a lost
// answer) is answered 202 with its id and runs nothing more; a different
// body with the same id is refused with 409 naming id.
func TestIdenticalRetryOfLiveJob(t *testing.T) {
	a, g, c, _ := limitsAgent(t, 10, nil)
	body := limitJob("retry-1", "retry-dom")
	if code, _, ans := postJob(t, c, body); code != http.StatusAccepted {
		t.Fatalf("first POST: %d %v", code, ans)
	}
	<-g.started // running, held at its lookup
	code, _, ans := postJob(t, c, body)
	if code != http.StatusAccepted || ans["id"] != "retry-1" {
		t.Fatalf("identical retry: %d %v; want 202 with the same id", code, ans)
	}
	code, _, ans = postJob(t, c, limitJob("retry-1", "retry-other"))
	errs, _ := ans["errors"].([]any)
	if code != http.StatusConflict || len(errs) != 1 || errs[0].(map[string]any)["field"] != "id" {
		t.Fatalf("another body with the same id: %d %v; want 409 naming id", code, ans)
	}
	g.open()
	if r := waitJob(t, c, "retry-1"); r.State != result.StateDone || r.Domain != "retry-dom" {
		t.Fatalf("retry-1: %s %s %+v", r.State, r.Domain, r.Error)
	}
	waitFor(t, "nothing queued (the retry queued nothing)", func() bool { return a.Health()["queued"] == 0 })
}
