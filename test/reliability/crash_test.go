package reliability

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/payload/owner"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// envInt reads an integer override from the environment.
func envInt(t *testing.T, name string, def int64) int64 {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v
}

// TestCrashSafety drops 1000 attach jobs for 1000 domains of a test-driver
// node file, then SIGKILLs the real agent binary at seeded random moments
// (VMPAYLOAD_CRASH_SEED, VMPAYLOAD_CRASH_TRIALS) and restarts it, until a
// final run finishes the work. Invariants checked at the end:
//
//   - every job has exactly one result file (done/ID.json xor
//     failed/ID.json), in state done, carrying a claim token;
//   - incoming/ and processing/ are empty and no result temp file is left;
//   - the payload directory holds no temp or partial file: every file is an
//     ISO9660 image labelled cidata (blkid -p) whose sha256 equals the one
//     in the result that names it;
//   - at most one image per domain, and it is the one the domain's result
//     names.
//
// The test driver keeps domains in the agent process only: every start
// reloads the node file, so domains come back without payload drives and
// the start-up orphan collection removes every image of an earlier run.
// Hence an image must exist exactly for the jobs whose result the final run
// wrote (finished_at after the final start) and for no other job.
func TestCrashSafety(t *testing.T) {
	const jobs = 1000
	seed := envInt(t, "VMPAYLOAD_CRASH_SEED", time.Now().UnixNano())
	trials := int(envInt(t, "VMPAYLOAD_CRASH_TRIALS", 25))
	t.Logf("crash seed %d (VMPAYLOAD_CRASH_SEED=%d to repeat), %d trials", seed, seed, trials)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))

	base := t.TempDir()
	uri := nodeFile(t, base, "crash", jobs)
	a := newAgent(t, base, uri, "--workers", "4")
	ids := make([]string, jobs)
	for i := range ids {
		ids[i] = fmt.Sprintf("crash-%04d", i)
		a.drop(ids[i], jsonJob(t, map[string]any{
			"version": 1, "id": ids[i], "domain": fmt.Sprintf("crash-%04d", i), "action": "attach",
			"hostname": fmt.Sprintf("crash-%04d", i), "runcmd": []string{fmt.Sprintf("echo %d", i)},
		}))
	}

	countResults := func() int {
		n := 0
		for _, sub := range []string{spool.Done, spool.Failed} {
			ents, _ := os.ReadDir(filepath.Join(a.SpoolDir, sub))
			for _, e := range ents {
				if spool.IsJobName(e.Name()) && !strings.HasSuffix(e.Name(), ".job.json") {
					n++
				}
			}
		}
		return n
	}

	// Kill moments: a quarter of the trials kill at a random time in the
	// first 600ms (start-up: orphan collection, recovery of processing/);
	// the others wait until 1-70 more results exist and then a random
	// 0-30ms more, so that kills land in the middle of the work.
	killed := 0
	for i := 0; i < trials; i++ {
		before := countResults()
		a.start()
		var how string
		if rng.IntN(4) == 0 || before >= jobs-100 {
			d := time.Duration(rng.IntN(600)) * time.Millisecond
			time.Sleep(d)
			how = fmt.Sprintf("after %v", d)
		} else {
			target := before + 1 + rng.IntN(70)
			jitter := time.Duration(rng.IntN(30)) * time.Millisecond
			deadline := time.Now().Add(2 * time.Minute)
			for countResults() < target && time.Now().Before(deadline) {
				if _, done := a.Exited(); done {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			time.Sleep(jitter)
			how = fmt.Sprintf("at %d results + %v", target, jitter)
		}
		if _, done := a.Exited(); done {
			t.Fatalf("trial %d: agent exited on its own\n%s", i, a.Tail(30))
		}
		a.kill()
		killed++
		t.Logf("trial %2d: SIGKILL %s; %d/%d results", i, how, countResults(), jobs)
	}

	finalStart := time.Now().UTC()
	running := a.LogCount("agent running")
	a.start()
	a.waitReady(60 * time.Second)
	// /healthz answers (liveness) while the start-up recovery, which
	// includes the orphan collection judged below, still runs; when every
	// job had its result before this run, the loop below would end at once
	// and stop the agent in the middle of it.
	deadline := time.Now().Add(time.Minute)
	for a.LogCount("agent running") <= running {
		if time.Now().After(deadline) {
			t.Fatalf("final run: the agent did not finish starting within a minute\n%s", a.Tail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
	deadline = time.Now().Add(5 * time.Minute)
	for countResults() < jobs || dirLen(t, filepath.Join(a.SpoolDir, spool.Processing)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("final run: %d/%d results after 5 min\n%s", countResults(), jobs, a.Tail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.stop()
	t.Logf("%d SIGKILLs; %d interrupted jobs re-run; %d results written before the final run",
		killed, a.LogCount("re-running interrupted job"), countBefore(t, a, ids, finalStart))

	// Spool: exactly one result per job, nothing pending, no temp files.
	for _, sub := range []string{spool.Incoming, spool.Processing} {
		if n := dirLen(t, filepath.Join(a.SpoolDir, sub)); n != 0 {
			t.Errorf("%s/ holds %d files after the final run", sub, n)
		}
	}
	for _, sub := range []string{spool.Done, spool.Failed} {
		ents, err := os.ReadDir(filepath.Join(a.SpoolDir, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !spool.IsJobName(e.Name()) {
				t.Errorf("%s/%s: leftover file (temp or foreign)", sub, e.Name())
			}
		}
	}
	if n := countResults(); n != jobs {
		t.Errorf("%d result files for %d jobs", n, jobs)
	}
	results := map[string]result.Result{}
	for _, id := range ids {
		var found []result.Result
		for _, st := range []result.State{result.StateDone, result.StateFailed} {
			p := (&spool.Spool{Root: a.SpoolDir}).ResultPath(id, st)
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			var r result.Result
			if err := json.Unmarshal(b, &r); err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			found = append(found, r)
		}
		if len(found) != 1 {
			t.Errorf("job %s has %d result files", id, len(found))
			continue
		}
		r := found[0]
		if r.ID != id || r.State != result.StateDone || r.Claim == "" || r.Payload == nil || r.FinishedAt == nil {
			t.Errorf("job %s: unexpected result %+v (error %+v)", id, r, r.Error)
			continue
		}
		if want := domainUUID(idNum(id)); r.DomainUUID != want {
			t.Errorf("job %s: domain uuid %s, want %s", id, r.DomainUUID, want)
		}
		results[id] = r
	}

	// Payload directory: complete images only, one per domain at most,
	// exactly those of the final run's results.
	ents, err := os.ReadDir(a.PayloadDir)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]result.Result{}
	for _, r := range results {
		byPath[r.Payload.Path] = r
	}
	perDomain := map[string]int{}
	for _, e := range ents {
		if e.Name() == owner.Dir {
			continue // the images' owner markers (payload/owner)
		}
		p := filepath.Join(a.PayloadDir, e.Name())
		r, ok := byPath[p]
		if !ok {
			t.Errorf("payload dir: %s is named by no result (temp, partial or superseded file)", e.Name())
			continue
		}
		perDomain[r.DomainUUID]++
		if !strings.HasPrefix(e.Name(), r.DomainUUID+"-") {
			t.Errorf("%s: not named after its domain %s", e.Name(), r.DomainUUID)
		}
		if got := blkid(t, p); got != "TYPE=iso9660 LABEL=cidata" {
			t.Errorf("%s: blkid -p says %q", e.Name(), got)
		}
		if sum := testenv.FileSHA256(t, p); sum != r.Payload.SHA256 {
			t.Errorf("%s: sha256 %s, result %s says %s", e.Name(), sum, r.ID, r.Payload.SHA256)
		}
	}
	for uuid, n := range perDomain {
		if n > 1 {
			t.Errorf("domain %s has %d images", uuid, n)
		}
	}
	present := 0
	for _, r := range results {
		_, err := os.Lstat(r.Payload.Path)
		final := !r.FinishedAt.Before(finalStart)
		switch {
		case final && err != nil:
			t.Errorf("job %s finished in the final run but its image %s is missing: %v", r.ID, r.Payload.Path, err)
		case !final && err == nil:
			t.Errorf("job %s finished before the final run (%v) but its image survived the start-up orphan collection", r.ID, r.FinishedAt)
		case final:
			present++
		}
	}
	t.Logf("payload dir: %d images, all named by final-run results; %d of %d results finished before the final run (images collected as orphans)", present, len(results)-present, len(results))
}

func countBefore(t *testing.T, a *agentProc, ids []string, ts time.Time) int {
	n := 0
	for _, id := range ids {
		if r, ok := a.spoolResult(id); ok && r.FinishedAt != nil && r.FinishedAt.Before(ts) {
			n++
		}
	}
	return n
}

func idNum(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
	return n
}

func dirLen(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// blkid returns "TYPE=... LABEL=..." of a file as blkid -p probes it.
func blkid(t *testing.T, p string) string {
	t.Helper()
	out, err := exec.Command("blkid", "-p", "-s", "TYPE", "-s", "LABEL", "-o", "export", p).Output()
	if err != nil {
		return "blkid failed: " + err.Error()
	}
	var typ, label string
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "TYPE="); ok {
			typ = v
		}
		if v, ok := strings.CutPrefix(l, "LABEL="); ok {
			label = v
		}
	}
	return "TYPE=" + typ + " LABEL=" + label
}
