package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/owner"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/testenv"
	"golang.org/x/sys/unix"
)

// bigFileJob is a valid job whose image holds about size bytes of
// incompressible text in a files[] entry.
func bigFileJob(t *testing.T, rng *rand.Rand, id, domain string, size int) []byte {
	t.Helper()
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, size)
	for i := range b {
		b[i] = letters[rng.Intn(len(letters))]
		if i%80 == 79 {
			b[i] = '\n'
		}
	}
	return jsonJob(t, map[string]any{"version": 1, "id": id, "domain": domain, "action": "attach",
		"files": []any{map[string]any{"path": "/var/lib/vmpx-filler.txt", "content": string(b)}}})
}

// TestFullPayloadFilesystem mounts a 2 MiB tmpfs as the agent's payload
// directory and fills it but for 64 KiB. Jobs whose ~200 KiB images do not
// fit (through the spool and the API) must each fail with io_error ("no
// space left on device", naming the payload directory), leave no temporary
// or partial file in the payload directory nor anything in the image
// workspace (TMPDIR, on another file system, so that the full payload
// directory is what fails), and the agent must stay healthy. When space
// returns (filler deleted, tmpfs grown to 16 MiB) the same jobs succeed.
func TestFullPayloadFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	base := t.TempDir()
	a := newAgent(t, base, nodeFile(t, base, "full", 8))
	ws := filepath.Join(base, "workspace")
	must(t, os.Mkdir(ws, 0o700))
	a.Env = []string{"TMPDIR=" + ws}
	if err := unix.Mount("vmpx-full", a.PayloadDir, "tmpfs", 0, "size=2m,mode=0711"); err != nil {
		t.Skipf("mounting a tmpfs on %s: %v", a.PayloadDir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(a.PayloadDir, unix.MNT_DETACH) })

	// The filler lives in a directory: the agent's orphan collection
	// removes unreferenced files of the payload directory, not directories.
	var st unix.Statfs_t
	must(t, unix.Statfs(a.PayloadDir, &st))
	free := int64(st.Bavail) * st.Bsize
	must(t, os.Mkdir(filepath.Join(a.PayloadDir, "fill"), 0o700))
	filler := filepath.Join(a.PayloadDir, "fill", "filler")
	must(t, os.WriteFile(filler, make([]byte, free-64<<10), 0o600))
	must(t, unix.Statfs(a.PayloadDir, &st))
	t.Logf("payload tmpfs: %d bytes free after the filler", int64(st.Bavail)*st.Bsize)

	a.start()
	a.waitReady(60 * time.Second)
	c := a.client()
	rng := rand.New(rand.NewSource(1))
	const perRoute, size = 4, 200 << 10
	docs := map[string][]byte{}
	var spoolIDs, apiIDs []string
	for i := 0; i < perRoute; i++ {
		id := fmt.Sprintf("full-spool-%d", i)
		docs[id] = bigFileJob(t, rng, id, fmt.Sprintf("full-%04d", i), size)
		spoolIDs = append(spoolIDs, id)
		id = fmt.Sprintf("full-api-%d", i)
		docs[id] = bigFileJob(t, rng, id, fmt.Sprintf("full-%04d", perRoute+i), size)
		apiIDs = append(apiIDs, id)
	}
	run := func(suffix string) map[string]result.Result {
		t.Helper()
		res := map[string]result.Result{}
		for _, id := range spoolIDs {
			doc := bytes.Replace(docs[id], []byte(`"id":"`+id+`"`), []byte(`"id":"`+id+suffix+`"`), 1)
			a.drop(id+suffix, doc)
		}
		for _, id := range apiIDs {
			doc := bytes.Replace(docs[id], []byte(`"id":"`+id+`"`), []byte(`"id":"`+id+suffix+`"`), 1)
			if code, m := a.submit(c, doc); code != http.StatusAccepted || m["id"] != id+suffix {
				t.Fatalf("POST %s: %d %v", id+suffix, code, m)
			}
		}
		for _, id := range spoolIDs {
			res[id] = a.waitResult(id+suffix, 60*time.Second)
		}
		for _, id := range apiIDs {
			res[id] = a.apiResult(c, id+suffix)
		}
		return res
	}
	clean := func(when string) {
		t.Helper()
		if n := testenv.DirNames(t, a.PayloadDir); len(n) > 0 && !(len(n) == 1 && n[0] == "fill") {
			for _, name := range n {
				if name != owner.Dir && (strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".tmp")) {
					t.Errorf("%s: temporary file %s left in the payload directory", when, name)
				}
			}
		}
		if n := testenv.DirNames(t, ws); len(n) > 0 {
			t.Errorf("%s: image workspace not cleaned: %v", when, n)
		}
		if n := testenv.DirNames(t, filepath.Join(a.SpoolDir, spool.Processing)); len(n) > 0 {
			t.Errorf("%s: jobs left in processing/: %v", when, n)
		}
	}

	first := true
	for id, r := range run("") {
		if first && r.Error != nil {
			t.Logf("%s: %s: %s", id, r.Error.Code, r.Error.Message)
			first = false
		}
		if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeIO {
			t.Errorf("%s on a full payload file system: %s %+v, want failed/%s", id, r.State, r.Error, result.CodeIO)
			continue
		}
		if !strings.Contains(r.Error.Message, "no space left on device") || !strings.Contains(r.Error.Message, a.PayloadDir) {
			t.Errorf("%s: error %q does not say the payload directory %s is full", id, r.Error.Message, a.PayloadDir)
		}
	}
	clean("after the failures")
	if n := testenv.DirNames(t, a.PayloadDir); len(n) != 1 {
		t.Errorf("payload directory holds %v, want only the filler", n)
	}
	if err, done := a.Exited(); done {
		t.Fatalf("agent exited: %v", err)
	}
	a.healthy(c)
	if n := a.LogCount("level=ERROR"); n > 0 {
		t.Errorf("%d ERROR lines in the agent log:\n%s", n, a.Tail(20))
	}

	// Space returns: the filler goes and the tmpfs grows.
	must(t, os.RemoveAll(filepath.Join(a.PayloadDir, "fill")))
	must(t, unix.Mount("vmpx-full", a.PayloadDir, "tmpfs", unix.MS_REMOUNT, "size=16m,mode=0711"))
	images := 0
	for id, r := range run("-again") {
		if r.State != result.StateDone || r.Payload == nil {
			t.Errorf("%s once space returned: %s %+v", id, r.State, r.Error)
			continue
		}
		b, err := os.ReadFile(r.Payload.Path)
		if err != nil || filepath.Dir(r.Payload.Path) != a.PayloadDir {
			t.Errorf("%s: image %s: %v", id, r.Payload.Path, err)
			continue
		}
		if testenv.SHA256(b) != r.Payload.SHA256 {
			t.Errorf("%s: image %s does not have the reported sha256", id, r.Payload.Path)
		}
		images++
	}
	clean("after the retries")
	a.healthy(c)
	a.stop()
	t.Logf("%d jobs (%d spool, %d API, ~%d KiB images) failed with %s on the full payload tmpfs, nothing left behind; %d done once space returned",
		2*perRoute, perRoute, perRoute, size>>10, result.CodeIO, images)
}

// TestRequestFlood floods the API socket of an agent with one worker and
// queue_limit 4 (most jobs refused), then of one with the default
// queue_limit (most accepted): 64 concurrent clients post 1200 requests in all — valid
// jobs, bodies over the 1 MiB limit with and without Content-Length, health
// and list requests — while 24 more clients hold submissions open with
// half-sent bodies. The agent's VmHWM (peak RSS) must stay under 200 MB;
// oversize bodies get 413; refused jobs get 503 with "queue full" or "too
// many job submissions" and are not run; every job answered 202 ends with
// exactly one result; the agent is healthy afterwards and takes a new job.
func TestRequestFlood(t *testing.T) {
	t.Run("queue_limit=4", func(t *testing.T) { flood(t, 4) })
	t.Run("queue_limit=10000", func(t *testing.T) { flood(t, 10000) })
}

func flood(t *testing.T, queueLimit int) {
	base := t.TempDir()
	const domains = 16
	a := newAgent(t, base, nodeFile(t, base, "flood", domains), "--queue-limit", fmt.Sprint(queueLimit), "--workers", "1", "--log-level", "info")
	a.start()
	a.waitReady(60 * time.Second)
	c := a.client()
	pid := a.PID()

	// Peak memory, sampled while flooding; VmHWM is the kernel's own peak.
	var maxRSS atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if kb, err := agenttest.ProcStatusKB(pid, "VmRSS"); err == nil && int64(kb) > maxRSS.Load() {
				maxRSS.Store(int64(kb))
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	// Half-sent submissions: headers and a few body bytes, then nothing.
	var slow []net.Conn
	for i := 0; i < 24; i++ {
		conn, err := net.Dial("unix", a.Socket)
		must(t, err)
		fmt.Fprintf(conn, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n{\"version\": 1,")
		slow = append(slow, conn)
	}

	oversize := []byte(fmt.Sprintf(`{"version":1,"domain":"flood-0000","user_data":"#cloud-config\n# %s"}`, strings.Repeat("x", job.MaxJobBytes)))
	const clients, perClient = 64, 19
	var (
		mu       sync.Mutex
		accepted []string
		refused  []string
		counts   = map[string]int{}
		problems []string
	)
	note := func(kind string, code int, body []byte, err error) {
		mu.Lock()
		defer mu.Unlock()
		counts[fmt.Sprintf("%s %d", kind, code)]++
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", kind, err))
		}
	}
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			hc := a.client()
			for k := 0; k < perClient; k++ {
				n := w*perClient + k
				switch n % 5 {
				case 0, 1, 2: // a valid job
					id := fmt.Sprintf("flood-%d", n)
					doc := jsonJob(t, map[string]any{"version": 1, "id": id, "domain": fmt.Sprintf("flood-%04d", n%domains), "action": "attach",
						"hostname": fmt.Sprintf("h%d", n), "users": []any{map[string]any{"name": "u", "password": "FLOOD-PW"}}})
					code, body, err := a.do(hc, "POST", "/v1/jobs", doc)
					note("valid", code, body, err)
					mu.Lock()
					switch {
					case err != nil:
					case code == http.StatusAccepted:
						accepted = append(accepted, id)
					case code == http.StatusServiceUnavailable && bytes.Contains(body, []byte("queue full")):
						refused = append(refused, id)
						counts["503 queue full"]++
					case code == http.StatusServiceUnavailable && bytes.Contains(body, []byte("too many job submissions")):
						refused = append(refused, id)
						counts["503 too many submissions"]++
					default:
						problems = append(problems, fmt.Sprintf("valid job %s: %d %s", id, code, trunc(body)))
					}
					mu.Unlock()
				case 3: // over the size limit, with Content-Length or chunked
					var rd io.Reader = bytes.NewReader(oversize)
					kind := "oversize"
					if n%2 == 1 {
						rd, kind = io.MultiReader(bytes.NewReader(oversize)), "oversize-chunked"
					}
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					req, _ := http.NewRequestWithContext(ctx, "POST", client.URL("/v1/jobs"), rd)
					resp, err := hc.HTTP().Do(req)
					code := 0
					var body []byte
					if err == nil {
						code = resp.StatusCode
						body, _ = io.ReadAll(resp.Body)
						resp.Body.Close()
					}
					cancel()
					note(kind, code, body, nil)
					// The server may close the connection before the
					// client finished sending: a write error is an
					// acceptable answer too, a 2xx never is.
					if err == nil && code != http.StatusRequestEntityTooLarge {
						mu.Lock()
						problems = append(problems, fmt.Sprintf("%s body: %d %s", kind, code, trunc(body)))
						mu.Unlock()
					}
				case 4: // reads
					path := "/healthz"
					if n%2 == 0 {
						path = "/v1/jobs"
					}
					code, body, err := a.do(hc, "GET", path, nil)
					note("GET "+path, code, body, err)
					if err == nil && code != http.StatusOK {
						mu.Lock()
						problems = append(problems, fmt.Sprintf("GET %s: %d %s", path, code, trunc(body)))
						mu.Unlock()
					}
				}
			}
		}(w)
	}
	wg.Wait()
	for _, conn := range slow {
		conn.Close()
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(accepted) == 0 {
		t.Fatal("no job was accepted")
	}

	// Every accepted job ends with exactly one result; refused ones never ran.
	for _, id := range accepted {
		r := a.apiResult(c, id)
		if r.State != result.StateDone {
			t.Errorf("%s: %s %+v", id, r.State, r.Error)
		}
	}
	close(stopSampling)
	<-sampled
	hwm, err := agenttest.ProcStatusKB(pid, "VmHWM")
	must(t, err)
	for _, id := range accepted {
		n := 0
		for _, sub := range []string{spool.Done, spool.Failed} {
			if _, err := os.Stat(filepath.Join(a.SpoolDir, sub, id+".json")); err == nil {
				n++
			}
		}
		if n != 1 {
			t.Errorf("accepted job %s has %d result files", id, n)
		}
	}
	for _, id := range refused {
		if code, _, err := a.do(c, "GET", "/v1/jobs/"+id, nil); err != nil || code != http.StatusNotFound {
			t.Errorf("refused job %s is known to the agent: %d %v", id, code, err)
		}
		for _, sub := range []string{spool.Incoming, spool.Processing, spool.Done, spool.Failed} {
			if _, err := os.Stat(filepath.Join(a.SpoolDir, sub, id+".json")); err == nil {
				t.Errorf("refused job %s is in %s/", id, sub)
			}
		}
	}
	if n := testenv.DirNames(t, filepath.Join(a.SpoolDir, spool.Processing)); len(n) > 0 {
		t.Errorf("jobs left in processing/: %v", n)
	}
	const bound = 200 << 10 // KiB
	if hwm > bound {
		t.Errorf("agent peak RSS (VmHWM) %d KiB during the flood; want < %d KiB", hwm, bound)
	}
	if err, done := a.Exited(); done {
		t.Fatalf("agent exited: %v", err)
	}
	a.healthy(c)
	code, m := a.submit(c, jsonJob(t, map[string]any{"version": 1, "id": "after-flood", "domain": "flood-0001", "action": "attach"}))
	if code != http.StatusAccepted {
		t.Fatalf("POST after the flood: %d %v", code, m)
	}
	if r := a.apiResult(c, "after-flood"); r.State != result.StateDone {
		t.Errorf("after-flood: %s %+v", r.State, r.Error)
	}
	if n := a.LogCount("FLOOD-PW"); n > 0 {
		t.Errorf("the flood's plaintext password is in %d log lines", n)
	}
	a.stop()
	b, _ := json.Marshal(counts)
	t.Logf("%d requests from %d clients + %d half-sent bodies: %s; %d accepted (all done, one result each), %d refused with 503; peak RSS sampled %d KiB, VmHWM %d KiB (bound %d KiB)",
		clients*perClient, clients, len(slow), b, len(accepted), len(refused), maxRSS.Load(), hwm, bound)
}
