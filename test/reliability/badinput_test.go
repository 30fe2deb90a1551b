package reliability

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/payload/job"
)

// badExpect is a NAME.expect file of test/testdata/bad (see gen.go there).
type badExpect struct {
	Code   string      `json:"code"`
	Errors [][2]string `json:"errors"`
	API    int         `json:"api"`
}

type badCase struct {
	name string
	doc  []byte
	exp  badExpect
}

const badDir = "../testdata/bad"

func loadBadCases(t *testing.T) []badCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(badDir, "*.expect"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []badCase
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".expect")
		var e badExpect
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		doc, err := os.ReadFile(filepath.Join(badDir, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, badCase{name, doc, e})
	}
	if len(cases) < 150 {
		t.Fatalf("the bad-input corpus has %d cases; want at least 150", len(cases))
	}
	// A document over the size limit is made here rather than committed.
	big := fmt.Sprintf(`{"version":1,"domain":"bad-0000","user_data":"#cloud-config\n# %s"}`, strings.Repeat("x", job.MaxJobBytes))
	cases = append(cases, badCase{"generated-over-size-limit", []byte(big),
		badExpect{Code: "invalid_job", Errors: [][2]string{{"", job.CodeTooLarge}}, API: http.StatusRequestEntityTooLarge}})
	return cases
}

// badSecrets fills the secrets directory with the traps the corpus names.
// The secret behind the symlinks lives outside the directory and carries a
// distinctive string that must never show up in a result.
func badSecrets(t *testing.T, a *agentProc) string {
	t.Helper()
	outside := filepath.Join(a.Dir, "outside-secret")
	const marker = "OUTSIDE-SECRET-9d1c5e"
	must(t, os.WriteFile(outside, []byte(marker+"\n"), 0o600))
	must(t, os.Symlink(outside, filepath.Join(a.SecretsDir, "link-out")))
	must(t, os.Symlink("/etc", filepath.Join(a.SecretsDir, "link-dir")))
	must(t, os.Mkdir(filepath.Join(a.SecretsDir, "a-dir"), 0o700))
	must(t, syscall.Mkfifo(filepath.Join(a.SecretsDir, "a-fifo"), 0o600))
	must(t, os.WriteFile(filepath.Join(a.SecretsDir, "empty"), nil, 0o600))
	must(t, os.WriteFile(filepath.Join(a.SecretsDir, "big"), make([]byte, 1<<20+1), 0o600))
	must(t, os.WriteFile(filepath.Join(a.SecretsDir, "bad-yaml"), []byte("#cloud-config\na: [\n"), 0o600))
	return marker
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// missingErrors lists the expected (field, code) pairs missing from got; an
// empty expected code matches any code, a field ending in "*" any field
// with that prefix.
func missingErrors(want [][2]string, got []job.FieldError) []string {
	var miss []string
	for _, w := range want {
		ok := false
		for _, g := range got {
			field := g.Field == w[0]
			if pre, ok := strings.CutSuffix(w[0], "*"); ok {
				field = strings.HasPrefix(g.Field, pre)
			}
			if field && (w[1] == "" || g.Code == w[1]) {
				ok = true
			}
		}
		if !ok {
			miss = append(miss, fmt.Sprintf("%q/%s", w[0], w[1]))
		}
	}
	return miss
}

func describe(errs []job.FieldError) string {
	var s []string
	for _, e := range errs {
		s = append(s, fmt.Sprintf("%q/%s", e.Field, e.Code))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// TestBadInputSpool drops every corpus case into the spool of a running
// agent: each must end as failed/<id>.json with the expected code and field
// errors, and the agent must stay healthy. Symlinks, a FIFO and a directory
// dropped into incoming/ must fail with bad_file without their targets
// being touched.
func TestBadInputSpool(t *testing.T) {
	cases := loadBadCases(t)
	base := t.TempDir()
	a := newAgent(t, base, nodeFile(t, base, "bad", 4))
	marker := badSecrets(t, a)
	a.start()
	a.waitReady(60 * time.Second)
	c := a.client()

	for _, bc := range cases {
		a.drop(bc.name, bc.doc)
	}
	// Special files in incoming/, made here.
	target := filepath.Join(base, "valid-job.json")
	validJob := []byte(`{"version":1,"domain":"bad-0001","action":"attach","hostname":"target"}`)
	must(t, os.WriteFile(target, validJob, 0o600))
	in := filepath.Join(a.SpoolDir, spool.Incoming)
	before, err := os.Stat(target)
	must(t, err)
	must(t, os.Symlink(target, filepath.Join(in, "special-symlink-to-job.json")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(in, "special-symlink-to-passwd.json")))
	must(t, os.Symlink(filepath.Join(base, "nothing-here"), filepath.Join(in, "special-dangling-symlink.json")))
	must(t, syscall.Mkfifo(filepath.Join(in, "special-fifo.json"), 0o600))
	must(t, os.Mkdir(filepath.Join(in, "special-directory.json"), 0o700))
	specials := []string{"special-symlink-to-job", "special-symlink-to-passwd", "special-dangling-symlink", "special-fifo", "special-directory"}

	for i, bc := range cases {
		if i%25 == 0 {
			a.healthy(c)
		}
		r := a.waitResult(spool.IDFromName(bc.name+".json"), 60*time.Second)
		checkFailed(t, "spool", bc, r)
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), marker) {
			t.Errorf("%s: the result quotes the secret behind a symlink", bc.name)
		}
	}
	for _, name := range specials {
		r := a.waitResult(name, 60*time.Second)
		if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeBadFile {
			t.Errorf("%s: want failed/bad_file, got %s %+v", name, r.State, r.Error)
		}
	}
	after, err := os.Stat(target)
	must(t, err)
	got, _ := os.ReadFile(target)
	if string(got) != string(validJob) || !after.ModTime().Equal(before.ModTime()) || after.Mode() != before.Mode() {
		t.Errorf("the symlink's target was touched: %s %v %v", got, after.ModTime(), after.Mode())
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Errorf("/etc/passwd: %v", err)
	}
	if st, err := os.Lstat(filepath.Join(a.SecretsDir, "link-out")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("secrets/link-out changed: %v", err)
	}
	if n := dirLen(t, filepath.Join(a.SpoolDir, spool.Processing)) + dirLen(t, in); n != 0 {
		t.Errorf("%d files left in incoming/ and processing/", n)
	}
	a.healthy(c)
	a.stop()
	t.Logf("%d corpus cases + %d special files, all failed with the expected code and fields through the spool", len(cases), len(specials))
}

// TestBadInputAPI posts every corpus case to POST /v1/jobs: validation
// problems answer 400 with the field errors, oversized documents 413, and
// run-time problems 202 followed by a failed result (a job the engine
// would fail invalid_job, e.g. for a secret, is refused at once with 400).
func TestBadInputAPI(t *testing.T) {
	cases := loadBadCases(t)
	base := t.TempDir()
	a := newAgent(t, base, nodeFile(t, base, "bad", 4))
	badSecrets(t, a)
	a.start()
	a.waitReady(60 * time.Second)
	c := a.client()
	counts := map[int]int{}
	for i, bc := range cases {
		if i%25 == 0 {
			a.healthy(c)
		}
		code, body, err := a.do(c, "POST", "/v1/jobs", bc.doc)
		if err != nil {
			t.Fatalf("%s: %v", bc.name, err)
		}
		counts[code]++
		if code != bc.exp.API {
			t.Errorf("%s: POST answered %d, want %d: %s", bc.name, code, bc.exp.API, trunc(body))
			continue
		}
		var resp struct {
			ID     string           `json:"id"`
			Errors []job.FieldError `json:"errors"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Errorf("%s: body is not JSON: %v", bc.name, err)
			continue
		}
		switch code {
		case http.StatusAccepted:
			r := a.apiResult(c, resp.ID)
			checkFailed(t, "api", bc, r)
		default:
			if miss := missingErrors(bc.exp.Errors, resp.Errors); len(miss) > 0 {
				t.Errorf("%s: %d response lacks %v; has %s", bc.name, code, miss, describe(resp.Errors))
			}
		}
	}
	a.healthy(c)
	a.stop()
	t.Logf("%d cases through the API: %v (status: count)", len(cases), counts)
}

func checkFailed(t *testing.T, via string, bc badCase, r result.Result) {
	t.Helper()
	if r.State != result.StateFailed || r.Error == nil {
		t.Errorf("%s %s: state %s, want failed", via, bc.name, r.State)
		return
	}
	if r.Error.Code != bc.exp.Code {
		t.Errorf("%s %s: code %s, want %s (%s)", via, bc.name, r.Error.Code, bc.exp.Code, r.Error.Message)
	}
	if miss := missingErrors(bc.exp.Errors, r.Errors); len(miss) > 0 {
		t.Errorf("%s %s: errors lack %v; have %s", via, bc.name, miss, describe(r.Errors))
	}
}

func trunc(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
