package reliability

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/test/testenv"
	"golang.org/x/sys/unix"
)

// healWait bounds every wait of the fault matrix; a row fails if a state is
// not reached in that time (the rows wait for states, not for clocks).
const healWait = 60 * time.Second

// health is the /healthz answer.
type health struct {
	Status         string   `json:"status"`
	Reasons        []string `json:"reasons"`
	ResultsPending int      `json:"results_pending"`
}

func (a *agentProc) health(c *client.Client) health {
	a.t.Helper()
	code, b, err := a.do(c, "GET", "/healthz", nil)
	if err != nil || code != http.StatusOK {
		a.t.Fatalf("GET /healthz: %d %v %s", code, err, b)
	}
	var h health
	if err := json.Unmarshal(b, &h); err != nil {
		a.t.Fatalf("GET /healthz: %v\n%s", err, b)
	}
	return h
}

// waitFor polls cond until it holds; what names the state in the failure.
func (a *agentProc) waitFor(what string, cond func() bool) {
	a.t.Helper()
	a.waitForWithin(healWait, what, cond)
}

// waitForWithin is waitFor with another bound.
func (a *agentProc) waitForWithin(bound time.Duration, what string, cond func() bool) {
	a.t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if err, done := a.Exited(); done {
			a.t.Fatalf("agent exited while waiting for %s: %v\n%s", what, err, a.Tail(30))
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("%s: not reached after %v\n%s", what, bound, a.Tail(40))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitHealth waits until /healthz says status with a reason containing
// reason (any reason when empty) and returns the answer.
func (a *agentProc) waitHealth(c *client.Client, status, reason string) health {
	a.t.Helper()
	var h health
	a.waitFor(fmt.Sprintf("healthz %s %q", status, reason), func() bool {
		h = a.health(c)
		return h.Status == status && (reason == "" || strings.Contains(strings.Join(h.Reasons, "\n"), reason))
	})
	return h
}

// healJob is a small attach job for domain heal-%04d.
func healJob(t *testing.T, id string, dom int) []byte {
	return jsonJob(t, map[string]any{
		"version": 1, "id": id, "domain": fmt.Sprintf("heal-%04d", dom), "action": "attach",
		"hostname": fmt.Sprintf("heal-%04d", dom), "runcmd": []string{"echo " + id},
	})
}

// resultFiles counts the result files of id in done/ and failed/.
func (a *agentProc) resultFiles(id string) int {
	n := 0
	for _, sub := range []string{spool.Done, spool.Failed} {
		if _, err := os.Lstat(filepath.Join(a.SpoolDir, sub, id+".json")); err == nil {
			n++
		}
	}
	return n
}

// checkClean asserts that nothing is left in incoming/ or processing/ and
// that no temp file (a partial result or image) is left anywhere.
func (a *agentProc) checkClean() {
	a.t.Helper()
	// A job file leaves processing/ only after its result is written (so
	// that a crash in between re-finds it), so a test that has just seen
	// the result may still see the file: wait for it to go.
	for _, sub := range []string{spool.Incoming, spool.Processing} {
		dir := filepath.Join(a.SpoolDir, sub)
		a.waitFor(sub+"/ to empty", func() bool { return len(testenv.DirNames(a.t, dir)) == 0 })
	}
	for _, d := range []string{filepath.Join(a.SpoolDir, spool.Done), filepath.Join(a.SpoolDir, spool.Failed), a.PayloadDir} {
		for _, n := range testenv.DirNames(a.t, d) {
			if strings.HasSuffix(n, ".tmp") {
				a.t.Errorf("partial file left: %s", filepath.Join(d, n))
			}
		}
	}
}

// checkExactlyOnce asserts that each id has exactly one result, done, and
// that the image it names is in place with its sha256 when checkImages.
func (a *agentProc) checkExactlyOnce(ids []string, checkImages bool) {
	a.t.Helper()
	for _, id := range ids {
		if n := a.resultFiles(id); n != 1 {
			a.t.Errorf("%s: %d result files, want 1", id, n)
			continue
		}
		r, _ := a.spoolResult(id)
		if r.State != result.StateDone {
			a.t.Errorf("%s: %s %+v, want done", id, r.State, r.Error)
			continue
		}
		if checkImages && r.Payload != nil {
			if got := testenv.FileSHA256(a.t, r.Payload.Path); got != r.Payload.SHA256 {
				a.t.Errorf("%s: image %s sha256 %s, result says %s", id, r.Payload.Path, got, r.Payload.SHA256)
			}
		}
	}
}

// fillFS fills the file system of dir (a tmpfs) with a filler file in a
// directory fill/ and returns the filler's path.
func fillFS(t *testing.T, dir string) string {
	t.Helper()
	var st unix.Statfs_t
	must(t, unix.Statfs(dir, &st))
	must(t, os.MkdirAll(filepath.Join(dir, "fill"), 0o700))
	p := filepath.Join(dir, "fill", "filler")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	must(t, err)
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break // ENOSPC: full
		}
	}
	must(t, f.Close())
	return p
}

// faultRow is one row of the fault matrix.
type faultRow struct {
	name  string
	setup func(t *testing.T, a *agentProc) // before the agent starts
	// run injects the fault while jobs flow, heals it (or lets the agent
	// heal it) and returns the ids that must each end with one done result
	// and the time from the end of the fault to the agent healthy again.
	run func(t *testing.T, a *agentProc, c *client.Client) (ids []string, heal time.Duration)
	// images: check the images of the results (not when the fault is the
	// operator deleting images).
	images bool
}

// TestFaultMatrix injects host faults into a running agent (the real binary
// on libvirt's test driver) while jobs flow, and asserts for each that the
// agent heals without a restart (unless the row is about a crash), that no
// job is lost or reported twice, that no partial file is left, and that the
// error a user sees names the cause. docs/reliability.md has the matrix.
func TestFaultMatrix(t *testing.T) {
	rows := []faultRow{
		{name: "spool filesystem full, then freed", setup: mountSpoolTmpfs, run: spoolFull(false), images: true},
		{name: "spool filesystem full, agent killed during the retries", setup: mountSpoolTmpfs, run: spoolFull(true), images: true},
		{name: "payload directory removed", run: payloadRemoved},
		{name: "symlink in place of the payload directory", run: payloadSymlink, images: true},
		{name: "spool subdirectories removed", run: spoolDirsRemoved, images: true},
		{name: "socket directory removed", setup: socketInSubdir, run: socketRemoved, images: true},
		{name: "secrets directory unreadable", run: secretsUnreadable, images: true},
		{name: "payload image deleted under a defined domain", run: imageDeleted, images: true},
		{name: "job file truncated while the agent reads it", run: jobTruncated},
		{name: "incoming/ flooded past the inotify queue", run: incomingFlood},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			base := t.TempDir()
			a := newAgent(t, base, nodeFile(t, base, "heal", 16))
			if row.setup != nil {
				row.setup(t, a)
			}
			a.start()
			a.waitReady(healWait)
			c := a.client()
			ids, heal := row.run(t, a, c)
			a.waitHealth(c, "ok", "")
			a.checkExactlyOnce(ids, row.images)
			a.checkClean()
			if n := a.LogCount("panic"); n > 0 {
				t.Errorf("%d panic lines in the log", n)
			}
			t.Logf("%s: %d jobs, each exactly one done result, 0 lost; healthy %v after the fault ended", row.name, len(ids), heal.Round(time.Millisecond))
		})
	}
}

// mountSpoolTmpfs puts the spool on a small tmpfs (root only).
func mountSpoolTmpfs(t *testing.T, a *agentProc) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	must(t, os.MkdirAll(a.SpoolDir, 0o755))
	if err := unix.Mount("vmpx-spool", a.SpoolDir, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		t.Skipf("mounting a tmpfs on %s: %v", a.SpoolDir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(a.SpoolDir, unix.MNT_DETACH) })
}

// spoolFull: jobs are dropped, the spool file system is filled before the
// agent can write their results, and freed later; with crash, the agent is
// SIGKILLed while it retries and started again before space returns.
func spoolFull(crash bool) func(t *testing.T, a *agentProc, c *client.Client) ([]string, time.Duration) {
	return func(t *testing.T, a *agentProc, c *client.Client) ([]string, time.Duration) {
		const n = 8
		// Hold the jobs back until the file system is full: they go into
		// a directory of the spool file system and are renamed into
		// incoming/ (no space needed) once it is.
		hold := filepath.Join(a.SpoolDir, "hold")
		must(t, os.Mkdir(hold, 0o700))
		var ids []string
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("full-%d", i)
			ids = append(ids, id)
			must(t, os.WriteFile(filepath.Join(hold, id+".json"), healJob(t, id, i), 0o600))
		}
		filler := fillFS(t, a.SpoolDir)
		for _, id := range ids {
			must(t, os.Rename(filepath.Join(hold, id+".json"), filepath.Join(a.SpoolDir, spool.Incoming, id+".json")))
		}
		h := a.waitHealth(c, "degraded", "no space left on device")
		a.waitFor("all results pending", func() bool { return a.health(c).ResultsPending == n })
		t.Logf("degraded: %q", h.Reasons)
		a.waitFor("result writes retried", func() bool {
			v, err := a.metric(c, "vmpayload_result_write_retries_total")
			return err == nil && v > 0
		})
		for _, id := range ids {
			if a.resultFiles(id) != 0 {
				t.Errorf("%s: a result was written on a full spool", id)
			}
		}
		// A job posted meanwhile is refused, naming the cause.
		code, b, err := a.do(c, "POST", "/v1/jobs", healJob(t, "full-api", n))
		if err != nil || code == http.StatusAccepted || !strings.Contains(string(b), "no space left on device") {
			t.Errorf("POST on a full spool: %d %v %s, want a refusal naming the full disk", code, err, b)
		}
		a.checkClean2()
		if crash {
			a.kill()
			a.start()
			a.waitReady(healWait)
			a.waitFor("results pending again after the restart", func() bool { return a.health(c).ResultsPending == n })
		}
		must(t, os.Remove(filler))
		t0 := time.Now()
		a.waitHealth(c, "ok", "")
		for _, id := range ids {
			a.waitResult(id, healWait)
		}
		heal := time.Since(t0)
		if h := a.health(c); h.ResultsPending != 0 {
			t.Errorf("results_pending %d after healing", h.ResultsPending)
		}
		return ids, heal
	}
}

// checkClean2 asserts no partial result is left while results are pending.
func (a *agentProc) checkClean2() {
	a.t.Helper()
	for _, sub := range []string{spool.Done, spool.Failed} {
		for _, n := range testenv.DirNames(a.t, filepath.Join(a.SpoolDir, sub)) {
			if strings.HasSuffix(n, ".tmp") {
				a.t.Errorf("partial result left: %s/%s", sub, n)
			}
		}
	}
}

// dropHealJobs drops n heal jobs in incoming/, with ids prefix-idFrom,
// prefix-(idFrom+1), … made from healJob numbers jobFrom, jobFrom+1, …, and
// returns their ids.
func dropHealJobs(t *testing.T, a *agentProc, prefix string, n, idFrom, jobFrom int) []string {
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%d", prefix, idFrom+i)
		ids = append(ids, id)
		a.drop(id, healJob(t, id, jobFrom+i))
	}
	return ids
}

// payloadRemoved: the payload directory is removed (rm -rf) between two
// batches of jobs; the second batch must not fail for it.
func payloadRemoved(t *testing.T, a *agentProc, c *client.Client) ([]string, time.Duration) {
	ids := dropHealJobs(t, a, "rm-a", 4, 0, 0)
	a.waitResult(ids[0], healWait)
	must(t, removeDir(a.PayloadDir))
	t0 := time.Now()
	b := dropHealJobs(t, a, "rm-b", 4, 0, 4)
	for _, id := range append(ids, b...) {
		a.waitResult(id, healWait)
	}
	heal := time.Since(t0)
	st, err := os.Lstat(a.PayloadDir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o711 {
		t.Errorf("payload directory after healing: %v %v, want a 0711 directory", st, err)
	}
	a.checkExactlyOnce(b, true)
	a.waitFor("dirs_recreated_total{dir=payload} counted", func() bool {
		v, err := a.metric(c, "vmpayload_dirs_recreated_total", `dir="payload"`)
		return err == nil && v >= 1
	})
	return append(ids, b...), heal
}

// payloadSymlink: a symlink replaces the payload directory; jobs fail with
// io_error naming the symlink, nothing is written through it, /healthz says
// degraded; once the link is gone the agent recreates the directory and
// jobs succeed again.
func payloadSymlink(t *testing.T, a *agentProc, c *client.Client) ([]string, time.Duration) {
	target := filepath.Join(a.Dir, "elsewhere")
	must(t, os.Mkdir(target, 0o755))
	must(t, removeDir(a.PayloadDir))
	must(t, os.Symlink(target, a.PayloadDir))
	a.drop("link-0", healJob(t, "link-0", 0))
	r := a.waitResult("link-0", healWait)
	if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeIO || !strings.Contains(r.Error.Message, "symlink") {
		t.Errorf("job through a symlinked payload directory: %s %+v, want io_error naming the symlink", r.State, r.Error)
	}
	a.waitHealth(c, "degraded", "symlink")
	if n := testenv.DirNames(t, target); len(n) > 0 {
		t.Errorf("written through the symlink: %v", n)
	}
	must(t, os.Remove(a.PayloadDir))
	t0 := time.Now()
	a.waitHealth(c, "ok", "")
	heal := time.Since(t0)
	ids := dropHealJobs(t, a, "link", 4, 1, 1)
	for _, id := range ids {
		a.waitResult(id, healWait)
	}
	if n := a.resultFiles("link-0"); n != 1 {
		t.Errorf("link-0: %d result files, want 1", n)
	}
	return ids, heal
}

// spoolDirsRemoved: done/, failed/ and incoming/ are removed while jobs
// run; the agent recreates them, watches incoming/ again and writes every
// later result.
func spoolDirsRemoved(t *testing.T, a *agentProc, c *client.Client) ([]string, time.Duration) {
	first := dropHealJobs(t, a, "sub-a", 4, 0, 0)
	for _, id := range first {
		a.waitResult(id, healWait)
	}
	for _, sub := range []string{spool.Done, spool.Failed, spool.Incoming} {
		must(t, removeDir(filepath.Join(a.SpoolDir, sub)))
	}
	t0 := time.Now()
	a.waitFor("spool subdirectories recreated", func() bool {
		for _, sub := range []string{spool.Done, spool.Failed, spool.Incoming} {
			st, err := os.Lstat(filepath.Join(a.SpoolDir, sub))
			if err != nil || !st.IsDir() || st.Mode().Perm() != spool.DirMode {
				return false
			}
		}
		return true
	})
	heal := time.Since(t0)
	v, err := a.metric(c, "vmpayload_dirs_recreated_total", `dir="spool"`)
	if err != nil || v < 3 {
		t.Errorf("dirs_recreated_total{dir=spool} = %v %v, want >= 3", v, err)
	}
	ids := dropHealJobs(t, a, "sub-b", 8, 0, 4)
	for _, id := range ids {
		a.waitResult(id, healWait)
	}
	return ids, heal
}

// incomingFlood drops more jobs into incoming/ at once than the kernel's
// inotify queue holds (fs.inotify.max_queued_events, 16384 by default); the
// overflow is answered with a rescan and every job gets one result.
func incomingFlood(t *testing.T, a *agentProc, c *client.Client) ([]string, time.Duration) {
	if os.Getenv("VMPAYLOAD_FLOOD") != "1" {
		t.Skip("17000 jobs take about a minute: set VMPAYLOAD_FLOOD=1")
	}
	n := 17000
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		var q int
		if _, err := fmt.Sscan(string(b), &q); err == nil && q+616 > n {
			n = q + 616
		}
	}
	if n > 40000 {
		t.Skipf("max_queued_events is %d: too many jobs to flood it", n-616)
	}
	in := filepath.Join(a.SpoolDir, spool.Incoming)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("flood-%05d", i)
		doc := jsonJob(t, map[string]any{"version": 1, "id": ids[i], "domain": fmt.Sprintf("heal-%04d", i%16), "action": "detach"})
		tmp := filepath.Join(in, "."+ids[i]+".tmp")
		must(t, os.WriteFile(tmp, doc, 0o600))
		must(t, os.Rename(tmp, filepath.Join(in, ids[i]+".json")))
	}
	t0 := time.Now()
	a.waitForWithin(10*time.Minute, "all flood results", func() bool {
		for _, sub := range []string{spool.Incoming, spool.Processing} {
			if len(testenv.DirNames(t, filepath.Join(a.SpoolDir, sub))) > 0 {
				return false
			}
		}
		return true
	})
	t.Logf("%d jobs dropped at once; the watch overflowed %d times (each answered by a rescan)", n, a.LogCount("spool watch overflowed"))
	return ids, time.Since(t0)
}

// secretsUnreadable: the secrets directory goes away (moved aside: root
// reads through any mode); a job naming a secret fails invalid_job naming
// the directory, the agent stays ok, and the same job succeeds once the
// directory is back.
func secretsUnreadable(t *testing.T, a *agentProc, c *client.Client) ([]string, time.Duration) {
	must(t, os.WriteFile(filepath.Join(a.SecretsDir, "pw"), []byte("s3cret-heal\n"), 0o600))
	doc := func(id string) []byte {
		return jsonJob(t, map[string]any{"version": 1, "id": id, "domain": "heal-0000", "action": "attach",
			"users": []any{map[string]any{"name": "a", "password_secret": "pw"}}})
	}
	aside := a.SecretsDir + ".aside"
	must(t, os.Rename(a.SecretsDir, aside))
	a.drop("sec-0", doc("sec-0"))
	r := a.waitResult("sec-0", healWait)
	if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeInvalidJob ||
		!strings.Contains(r.Error.Message, a.SecretsDir) {
		t.Errorf("job with the secrets directory gone: %s %+v, want invalid_job naming %s", r.State, r.Error, a.SecretsDir)
	}
	a.healthy(c)
	must(t, os.Rename(aside, a.SecretsDir))
	t0 := time.Now()
	a.drop("sec-1", doc("sec-1"))
	a.waitResult("sec-1", healWait)
	return []string{"sec-1"}, time.Since(t0)
}

// imageDeleted: the payload image of a domain is deleted behind the agent's
// back; the same job again rebuilds it (not reused) with the same content.
func imageDeleted(t *testing.T, a *agentProc, c *client.Client) ([]string, time.Duration) {
	a.drop("img-0", healJob(t, "img", 0))
	first := a.waitResult("img", healWait)
	if first.Payload == nil {
		t.Fatalf("img: no payload in %+v", first)
	}
	must(t, os.Remove(first.Payload.Path))
	t0 := time.Now()
	// the same document again (same id: its earlier result is replaced)
	a.drop("img-1", healJob(t, "img", 0))
	a.waitFor("img re-run", func() bool {
		r, ok := a.spoolResult("img")
		return ok && r.FinishedAt != nil && r.FinishedAt.After(*first.FinishedAt)
	})
	r, _ := a.spoolResult("img")
	if r.Payload == nil || r.Payload.Reused || r.Payload.SHA256 != first.Payload.SHA256 || r.Payload.Path != first.Payload.Path {
		t.Errorf("img after deleting the image: %+v, want the same image rebuilt (reused false)", r.Payload)
	}
	return []string{"img"}, time.Since(t0)
}

// jobTruncated: job files are truncated in place right after they are
// dropped, racing the agent's read. Each job gets exactly one result:
// done if the agent read it whole, else failed invalid_job naming the
// parse error. The agent stays ok.
func jobTruncated(t *testing.T, a *agentProc, c *client.Client) ([]string, time.Duration) {
	const n = 16
	in := filepath.Join(a.SpoolDir, spool.Incoming)
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("trunc-%d", i)
		ids = append(ids, id)
		a.drop(id, healJob(t, id, i))
		_ = os.Truncate(filepath.Join(in, id+".json"), int64(10*i%40)) // gone already when claimed and run
	}
	t0 := time.Now()
	var done []string
	failed := 0
	for _, id := range ids {
		r := a.waitResult(id, healWait)
		if n := a.resultFiles(id); n != 1 {
			t.Errorf("%s: %d result files, want 1", id, n)
		}
		switch {
		case r.State == result.StateDone:
			done = append(done, id)
		case r.Error != nil && r.Error.Code == result.CodeInvalidJob:
			failed++
		default:
			t.Errorf("%s: %s %+v, want done or invalid_job", id, r.State, r.Error)
		}
	}
	t.Logf("%d truncated jobs: %d read whole (done), %d read truncated (invalid_job)", n, len(done), failed)
	a.healthy(c)
	// Failed ones keep their job copy in failed/; the agent takes new work.
	a.drop("trunc-after", healJob(t, "trunc-after", 0))
	a.waitResult("trunc-after", healWait)
	return append(done, "trunc-after"), time.Since(t0)
}

// socketInSubdir puts the API socket in a directory of its own (as
// /run/vmpayload/), which the socketRemoved row removes.
func socketInSubdir(t *testing.T, a *agentProc) {
	a.Socket = filepath.Join(a.Dir, "run", "agent.sock")
}

// socketRemoved: the socket's directory is removed (rm -rf /run/vmpayload)
// while jobs are posted; the agent recreates the directory and the socket,
// and the API takes jobs again.
func socketRemoved(t *testing.T, a *agentProc, c *client.Client) ([]string, time.Duration) {
	var ids []string
	for i := 0; i < 4; i++ {
		id := fmt.Sprintf("sock-a-%d", i)
		ids = append(ids, id)
		if code, m := a.submit(c, healJob(t, id, i)); code != http.StatusAccepted {
			t.Fatalf("POST %s: %d %v", id, code, m)
		}
	}
	c.CloseIdleConnections()
	must(t, removeDir(filepath.Dir(a.Socket)))
	t0 := time.Now()
	a.waitFor("the socket recreated and answering", func() bool {
		code, _, err := a.do(c, "GET", "/healthz", nil)
		return err == nil && code == http.StatusOK
	})
	heal := time.Since(t0)
	st, err := os.Lstat(a.Socket)
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o660 {
		t.Errorf("recreated socket: %v %v, want a 0660 socket", st, err)
	}
	for i := 0; i < 4; i++ {
		id := fmt.Sprintf("sock-b-%d", i)
		ids = append(ids, id)
		if code, m := a.submit(c, healJob(t, id, 4+i)); code != http.StatusAccepted {
			t.Fatalf("POST %s after the socket came back: %d %v", id, code, m)
		}
	}
	for _, id := range ids {
		a.apiResult(c, id)
		a.waitResult(id, healWait)
	}
	v, err := a.metric(c, "vmpayload_dirs_recreated_total", `dir="socket"`)
	if err != nil || v < 1 {
		t.Errorf("dirs_recreated_total{dir=socket} = %v %v, want >= 1", v, err)
	}
	return ids, heal
}

// removeDir removes dir as `rm -rf` would, but in one step as far as the
// agent can see: it is renamed away first, so the agent writing into it at
// that moment cannot make the removal fail ("directory not empty"); what it
// wrote there is gone with the rest.
func removeDir(dir string) error {
	gone := dir + ".removed"
	if err := os.Rename(dir, gone); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}
