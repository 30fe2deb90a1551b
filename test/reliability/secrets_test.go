package reliability

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/payload/owner"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestSecretsAndPermissions runs jobs carrying distinctive plaintext
// passwords and secrets (valid ones and ones that fail validation, through
// the spool and the API) and checks that none of those strings appears in
// the agent's log, in any result file or in the API's answers; that secret
// references cannot leave the secrets directory; and that images, spool
// directories and the socket get the configured modes and groups.
func TestSecretsAndPermissions(t *testing.T) {
	grp, err := user.LookupGroup("disk")
	if err != nil {
		t.Skipf("group disk: %v", err)
	}
	gid, _ := strconv.Atoi(grp.Gid)
	base := t.TempDir()
	a := newAgent(t, base, nodeFile(t, base, "sec", 8), "--image-group", grp.Name, "--socket-group", grp.Name, "--image-mode", "0640")

	secret := map[string]string{
		"pw":          "SECRET-PW-5e2b77\n",
		"ud":          "#cloud-config\nruncmd: [echo SECRET-UD-0c4d19]\n",
		"bad-ud-yaml": "#cloud-config\nSECRET-BADYAML-1d2c: [\n",
		"bad-ud-kind": "SECRET-BADKIND-8e1f plain text\n",
		"win-pw":      "SECRET-WINPW-3c8d\n", // a Windows administrator password: in the image only
	}
	for n, c := range secret {
		must(t, os.WriteFile(filepath.Join(a.SecretsDir, n), []byte(c), 0o600))
	}
	outside := filepath.Join(base, "outside")
	must(t, os.WriteFile(outside, []byte("SECRET-OUTSIDE-9f2e\n"), 0o600))
	must(t, os.Symlink(outside, filepath.Join(a.SecretsDir, "link-out")))
	must(t, os.Symlink("../outside", filepath.Join(a.SecretsDir, "link-rel")))
	markers := []string{"SECRET-PW-5e2b77", "SECRET-UD-0c4d19", "SECRET-BADYAML-1d2c", "SECRET-BADKIND-8e1f", "SECRET-OUTSIDE-9f2e",
		"PLAIN-PW-a81f3c", "PLAIN-PW-CONFLICT-3b9e", "PLAIN-HASH-77aa", "PLAIN-API-PW-42c1", "PLAIN-NUL-PW-6d0a", "PLAIN-BADUSER-PW-11fe",
		"PLAIN-LINKED-PW-5a7c", "SECRET-WINPW-3c8d", "PLAIN-WINPW-META-77e1"}
	// A job outside the spool, reachable only through a symlink in
	// incoming/: the agent must refuse the link, not read the job.
	linkedJob := filepath.Join(base, "linked-job.json")
	must(t, os.WriteFile(linkedJob, jsonJob(t, map[string]any{"version": 1, "domain": "sec-0000", "action": "attach",
		"users": []any{map[string]any{"name": "a", "password": "PLAIN-LINKED-PW-5a7c"}}}), 0o600))
	linkedBefore, err := os.Stat(linkedJob)
	must(t, err)

	type jc struct {
		id    string
		job   map[string]any
		state result.State
		code  string
	}
	u := func(o map[string]any) []any { return []any{o} }
	jobs := []jc{
		{"s-plain", map[string]any{"users": u(map[string]any{"name": "a", "password": "PLAIN-PW-a81f3c"})}, result.StateDone, ""},
		{"s-secret", map[string]any{"users": u(map[string]any{"name": "a", "password_secret": "pw"})}, result.StateDone, ""},
		{"s-ud-secret", map[string]any{"user_data_secret": "ud"}, result.StateDone, ""},
		{"s-conflict", map[string]any{"users": u(map[string]any{"name": "a", "password": "PLAIN-PW-CONFLICT-3b9e", "password_hash": "$6$x$y"})}, result.StateFailed, "invalid_job"},
		{"s-hash-plain", map[string]any{"users": u(map[string]any{"name": "a", "password_hash": "PLAIN-HASH-77aa"})}, result.StateFailed, "invalid_job"},
		{"s-nul-pw", map[string]any{"users": u(map[string]any{"name": "a", "password": "PLAIN-NUL-PW-6d0a\x00"})}, "", ""},
		{"s-bad-user", map[string]any{"users": u(map[string]any{"name": "bad user", "password": "PLAIN-BADUSER-PW-11fe"})}, result.StateFailed, "invalid_job"},
		{"s-bad-ud-yaml", map[string]any{"user_data_secret": "bad-ud-yaml"}, result.StateFailed, "invalid_job"},
		{"s-bad-ud-kind", map[string]any{"user_data_secret": "bad-ud-kind"}, result.StateFailed, "invalid_job"},
		{"s-link-out", map[string]any{"users": u(map[string]any{"name": "a", "password_secret": "link-out"})}, result.StateFailed, "invalid_job"},
		{"s-link-rel", map[string]any{"user_data_secret": "link-rel"}, result.StateFailed, "invalid_job"},
		{"s-dotdot", map[string]any{"user_data_secret": "../outside"}, result.StateFailed, "invalid_job"},
		{"s-abs", map[string]any{"users": u(map[string]any{"name": "a", "password_secret": outside})}, result.StateFailed, "invalid_job"},
		{"s-win-pw", map[string]any{"guest_os": "windows", "format": "configdrive", "hostname": "win-sec", "admin_password_secret": "win-pw"}, result.StateDone, ""},
		{"s-win-meta-pw", map[string]any{"guest_os": "windows", "format": "configdrive", "meta_data": map[string]any{"admin_pass": "PLAIN-WINPW-META-77e1"}}, result.StateFailed, "invalid_job"},
	}
	a.start()
	a.waitReady(60 * time.Second)
	c := a.client()
	// Everything /v1/events says during the run is searched too.
	var events bytes.Buffer
	var evMu sync.Mutex
	evCtx, evCancel := context.WithCancel(context.Background())
	evDone := make(chan struct{})
	evReq, _ := http.NewRequestWithContext(evCtx, "GET", client.URL("/v1/events"), nil)
	evResp, err := c.HTTP().Do(evReq)
	must(t, err)
	go func() {
		defer close(evDone)
		buf := make([]byte, 4096)
		for {
			n, err := evResp.Body.Read(buf)
			evMu.Lock()
			events.Write(buf[:n])
			evMu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	must(t, os.Symlink(linkedJob, filepath.Join(a.SpoolDir, spool.Incoming, "s-symlink.json")))
	for i, j := range jobs {
		j.job["version"], j.job["domain"], j.job["action"] = 1, fmt.Sprintf("sec-%04d", i%8), "attach"
		a.drop(j.id, jsonJob(t, j.job))
	}
	for _, j := range jobs {
		r := a.waitResult(j.id, 60*time.Second)
		if j.state != "" && (r.State != j.state || (j.code != "" && (r.Error == nil || r.Error.Code != j.code))) {
			t.Errorf("%s: %s %+v, want %s %s", j.id, r.State, r.Error, j.state, j.code)
		}
	}
	// The same through the API: a valid job and one rejected with 400.
	code, m := a.submit(c, jsonJob(t, map[string]any{"version": 1, "domain": "sec-0001", "action": "attach",
		"users": u(map[string]any{"name": "a", "password": "PLAIN-API-PW-42c1"})}))
	if code != http.StatusAccepted {
		t.Fatalf("API submit: %d %v", code, m)
	}
	if r := a.apiResult(c, m["id"].(string)); r.State != result.StateDone {
		t.Errorf("API job: %s %+v", r.State, r.Error)
	}
	code, body, err := a.do(c, "POST", "/v1/jobs", jsonJob(t, map[string]any{"version": 1, "domain": "sec-0001",
		"users": u(map[string]any{"name": "a", "password": "PLAIN-PW-CONFLICT-3b9e", "password_hash": "PLAIN-HASH-77aa"})}))
	if err != nil || code != http.StatusBadRequest {
		t.Errorf("API invalid job: %d %v", code, err)
	}
	if r := a.waitResult("s-symlink", 60*time.Second); r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeBadFile {
		t.Errorf("symlink in incoming/: %s %+v, want failed/%s", r.State, r.Error, result.CodeBadFile)
	}
	if st, err := os.Stat(linkedJob); err != nil || !st.ModTime().Equal(linkedBefore.ModTime()) || st.Mode() != linkedBefore.Mode() {
		t.Errorf("the job behind the symlink was touched: %v", err)
	}
	answers := string(body)
	_, list, _ := a.do(c, "GET", "/v1/jobs", nil)
	answers += string(list)
	_, metrics, _ := a.do(c, "GET", "/metrics", nil)
	answers += string(metrics)
	evCancel()
	<-evDone
	evResp.Body.Close()
	evMu.Lock()
	answers += events.String()
	nEvents := strings.Count(events.String(), "\n")
	evMu.Unlock()
	if nEvents < len(jobs) {
		t.Errorf("/v1/events gave %d lines for %d jobs", nEvents, len(jobs))
	}
	a.stop()

	// No plaintext anywhere but in the kept failed jobs (failed/*.job.json
	// is the job itself, mode 0600) and the images.
	var haystack []string
	logb, _ := os.ReadFile(a.LogPath)
	haystack = append(haystack, "agent log\x00"+string(logb), "API answers\x00"+answers)
	for _, sub := range []string{spool.Done, spool.Failed} {
		ents, _ := os.ReadDir(filepath.Join(a.SpoolDir, sub))
		for _, e := range ents {
			p := filepath.Join(a.SpoolDir, sub, e.Name())
			if strings.HasSuffix(e.Name(), ".job.json") {
				st, err := os.Stat(p)
				if err != nil || st.Mode().Perm() != 0o600 {
					t.Errorf("%s: kept failed job not 0600: %v", p, err)
				}
				continue
			}
			b, _ := os.ReadFile(p)
			haystack = append(haystack, p+"\x00"+string(b))
		}
	}
	for _, h := range haystack {
		where, text, _ := strings.Cut(h, "\x00")
		for _, mk := range markers {
			if strings.Contains(text, mk) {
				t.Errorf("%s contains the plaintext %q", where, mk)
			}
		}
	}
	if st, err := os.Stat(outside); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the secret outside the secrets dir was touched: %v", err)
	}

	// Modes and groups.
	imgs, _ := filepath.Glob(filepath.Join(a.PayloadDir, "*"))
	if len(imgs) == 0 {
		t.Error("no images written")
	}
	// the Windows administrator password is where cloudbase-init reads it
	inImage := false
	for _, p := range imgs {
		b, _ := os.ReadFile(p)
		inImage = inImage || bytes.Contains(b, []byte(`"admin_pass": "SECRET-WINPW-3c8d"`))
	}
	if !inImage {
		t.Error("no image carries the Windows administrator password as meta_data.json admin_pass")
	}
	for _, p := range imgs {
		if filepath.Base(p) == owner.Dir {
			continue // the images' owner markers (payload/owner)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o640 || int(st.Sys().(*syscall.Stat_t).Gid) != gid {
			t.Errorf("%s: mode %v gid %d, want 0640 gid %d", p, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Gid, gid)
		}
	}
	for _, sub := range []string{spool.Incoming, spool.Processing, spool.Done, spool.Failed} {
		st, err := os.Stat(filepath.Join(a.SpoolDir, sub))
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("spool %s: %v %v, want 0700", sub, st.Mode().Perm(), err)
		}
	}
	_ = filepath.WalkDir(a.SpoolDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s: mode %v readable by others", p, st.Mode().Perm())
			}
		}
		return nil
	})
	// The socket exists only while the agent runs.
	a.start()
	a.waitReady(60 * time.Second)
	st, err := os.Stat(a.Socket)
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o660 || int(st.Sys().(*syscall.Stat_t).Gid) != gid {
		t.Errorf("socket: %v %v, want socket 0660 gid %d", st.Mode(), err, gid)
	}
	a.stop()

	// A spool subdirectory replaced by a symlink: the agent refuses to
	// start rather than write results (or read jobs) through it.
	elsewhere := filepath.Join(base, "elsewhere")
	must(t, os.Mkdir(elsewhere, 0o700))
	must(t, os.Rename(filepath.Join(a.SpoolDir, spool.Done), filepath.Join(base, "done-moved")))
	must(t, os.Symlink(elsewhere, filepath.Join(a.SpoolDir, spool.Done)))
	a.start()
	if err, done := a.WaitExit(60 * time.Second); done {
		if err == nil || a.LogCount("symlinks are refused") == 0 {
			t.Errorf("agent with spool/done a symlink: exit %v; log:\n%s", err, a.Tail(5))
		}
	} else {
		t.Errorf("agent started with spool/done a symlink:\n%s", a.Tail(10))
		a.kill()
	}
	if n := testenv.DirNames(t, elsewhere); len(n) > 0 {
		t.Errorf("the agent wrote through the spool/done symlink: %v", n)
	}
	t.Logf("%d jobs + 1 symlinked job + 2 API requests; %d plaintext markers searched in %d files/answers (log, results, API answers, /metrics, %d events); images %d (0640, group %s); spool symlinks refused",
		len(jobs), len(markers), len(haystack), nEvents, len(imgs), grp.Name)
}
