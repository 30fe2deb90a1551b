package cloudinit_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
)

var updateRecorded = flag.Bool("update-recorded", false, "rewrite testdata/recorded.json from the current code")

// recordedPath holds, per job, the content hash, the instance-id and a
// digest of every rendered document as the renderer gave them when the file
// was written (issue 33: the YAML and JSON encoders were replaced by the
// libraries; nothing a job, an image or a result shows may change).
const recordedPath = "testdata/recorded.json"

// recorded is what a render shows of a job.
type recorded struct {
	ContentHash string `json:"content_hash"`
	InstanceID  string `json:"instance_id"`
	Documents   string `json:"documents"` // SHA-256 of every path, NUL, data, NUL
}

// TestRecordedRenders renders many varied jobs (the example jobs, the
// seeds and corpora of the fuzz tests, and generated jobs full of strings
// YAML and JSON must quote or escape, with small and big file contents)
// and compares their content hashes, instance-ids and documents with
// those recorded in testdata/recorded.json.
func TestRecordedRenders(t *testing.T) {
	jobs := recordedJobs(t)
	got := map[string]recorded{}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range jobs {
			if !yield(k) {
				return
			}
		}
	}) {
		_, c, rep := payload.Check(jobs[name], payload.CheckOptions{Secrets: true, SecretsDir: cloudinit.SecretsDir, Build: true})
		if !rep.OK() || c == nil {
			continue
		}
		r, err := payload.Render(c, payload.Options{Rand: &countingRand{}})
		if err != nil {
			if e := payloadtest.RenderRefusal(err); e != nil {
				t.Fatalf("%s: %v", name, e)
			}
			continue
		}
		h := sha256.New()
		for _, f := range r.Docs.Files {
			h.Write([]byte(f.Path))
			h.Write([]byte{0})
			h.Write(f.Data)
			h.Write([]byte{0})
		}
		got[name] = recorded{r.Docs.ContentHash, r.Docs.InstanceID, hex.EncodeToString(h.Sum(nil))}
	}
	if *updateRecorded {
		b, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(recordedPath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %d of %d jobs", len(got), len(jobs))
		return
	}
	b, err := os.ReadFile(recordedPath)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]recorded
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 300 {
		t.Fatalf("only %d recorded renders", len(want))
	}
	compared := 0
	for name, w := range want {
		if _, ok := jobs[name]; !ok {
			continue // an example or corpus file that is gone
		}
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: rendered when recorded, not now", name)
		case g != w:
			t.Errorf("%s: renders as %+v, recorded %+v", name, g, w)
		}
		compared++
	}
	if compared < 300 {
		t.Errorf("only %d recorded renders compared", compared)
	}
	// new examples and corpus files may come; the generator must not drift
	for name := range got {
		if _, ok := want[name]; !ok && strings.HasPrefix(name, "generated/") {
			t.Errorf("%s: renders now, was not recorded", name)
		}
	}
}

// countingRand gives the bytes 0, 1, 2, ... (a generated random seed that
// is the same on every render).
type countingRand struct{ n byte }

func (r *countingRand) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.n
		r.n++
	}
	return len(p), nil
}

// recordedJobs returns the job documents TestRecordedRenders renders, by
// name.
func recordedJobs(t *testing.T) map[string][]byte {
	t.Helper()
	jobs := map[string][]byte{}
	paths, _ := filepath.Glob("../../../configs/examples/*.json")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		jobs["example/"+filepath.Base(p)] = b
	}
	// FuzzRender's arguments, from its seeds and its corpus
	for i, a := range renderSeeds {
		jobs[fmt.Sprintf("FuzzRender/seed%d", i+1)] = a.job()
	}
	for _, p := range globCorpus(t, "testdata/fuzz/FuzzRender") {
		v := readCorpus(t, p)
		if len(v) == 5 {
			jobs["FuzzRender/"+filepath.Base(p)] = renderArgs{v[0].(string), v[1].(string), v[2].(string), v[3].(bool), v[4].(bool)}.job()
		}
	}
	for _, p := range globCorpus(t, "../../job/testdata/fuzz/FuzzParse") {
		if v := readCorpus(t, p); len(v) == 1 {
			jobs["FuzzParse/"+filepath.Base(p)] = []byte(v[0].(string))
		}
	}
	jobs["FuzzRenderJob/seed1"] = []byte(`{"version":1,"hostname":"h","user_data":"#cloud-config\na: 1\n","format":"configdrive"}`)
	jobs["FuzzRenderJob/seed2"] = []byte(`{"version":1,"media":"vfat","files":[{"path":"/etc/x","content":"eA==","encoding":"base64"}]}`)
	r := rand.New(rand.NewPCG(33, 1))
	for i := range 400 {
		b, err := json.Marshal(generatedJob(r, i))
		if err != nil {
			t.Fatal(err)
		}
		jobs[fmt.Sprintf("generated/%03d", i)] = b
	}
	return jobs
}

func globCorpus(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fuzz corpus in %s (%v)", dir, err)
	}
	return paths
}

// readCorpus reads a file of a fuzz corpus ("go test fuzz v1", then one
// string(...), []byte(...) or bool(...) per line).
func readCorpus(t *testing.T, path string) []any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "go test fuzz v1":
		case strings.HasPrefix(line, "string(") || strings.HasPrefix(line, "[]byte("):
			_, q, _ := strings.Cut(line, "(")
			s, err := strconv.Unquote(strings.TrimSuffix(q, ")"))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out = append(out, s)
		case strings.HasPrefix(line, "bool("):
			out = append(out, line == "bool(true)")
		default:
			t.Fatalf("%s: cannot read %q", path, line)
		}
	}
	return out
}

// oddStrings are strings around the rules of YAML's scalar styles and
// resolver, and of JSON's escapes.
var oddStrings = []string{
	"", "plain", "with spaces  inside", "ALL=(ALL) NOPASSWD:ALL", "$6$salt$hash./x", "/bin/bash", "_x",
	"a:b", "a#b", "a,b[c]{d}?", "y", "Yes", "off", "NULL", "True", "n", "yes please", "0644", "644", "01777",
	"123456789012345678", "1234567890123456789", "192.0.2.10/24", "2001:db8::1", "52:54:00:12:34:56",
	"1:20", "190:20:30.15", "1.5", "1e5", "0x1f", "0o17", "0b101", "1_000", "2001-12-14", "1.", "12 34",
	"004dcf1b-442d-8fc3-a048-bf3d32caa493", "fe80::", "a: b", "a #b", "a:", " lead", "trail ", "-x", "- x",
	"---", "...", ".inf", "~", "<<", "*ref", "&a", "!tag", "%x", "@x", "`x", "'q'", "\"q\"", "#c", "|x", ">x",
	"?x", ":x", "[x]", "{x}", ",x", "tab\there", "café", "nul\x00", "del\x7f", "line\n", "two\nlines\n",
	"no final break\nx", "empty\n\nline\n", "  indented\ninside\n", "first\n  indented\n",
	"# comment\n- item\nkey: value\n", "\nleading break\n", "trailing blank\n\n", "space before break \nx\n",
	"x\ntrailing space ", "\n", "with\ttab\n", "cr\r\nlf", "<script>&amp;</script>", "a\u2028b\u2029c",
	"\x01\x1f\b\f", "back\\slash", "☃ \U0001F600 ünïcödé", "\ufeffbom", "vmpayload-content-x-000000",
	"vmpayload-write-files-x", "write_files:\n  - path: /x\n", "vmpayload-hash-00-0",
}

func pick[T any](r *rand.Rand, l []T) T { return l[r.IntN(len(l))] }

// oneLine draws an odd string without control characters.
func oneLine(r *rand.Rand) string {
	for {
		if s := pick(r, oddStrings); !strings.ContainsFunc(s, func(c rune) bool { return c < ' ' }) {
			return s
		}
	}
}

func oddText(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(4); n >= 0; n-- {
		b.WriteString(pick(r, oddStrings))
	}
	return b.String()
}

// bigText is text of about n bytes made of odd strings.
func bigText(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(pick(r, oddStrings))
		b.WriteByte('\n')
	}
	return b.String()
}

// generatedJob draws a job document: mostly fields Check accepts, with
// odd strings wherever a job may hold any text.
func generatedJob(r *rand.Rand, i int) map[string]any {
	j := map[string]any{"version": 1}
	if r.IntN(3) == 0 {
		j["format"] = "configdrive"
	}
	if r.IntN(6) == 0 {
		j["media"] = "vfat"
	}
	if r.IntN(2) == 0 {
		j["hostname"] = pick(r, []string{"vm-1", "app-01.example.com", "h", "web" + strconv.Itoa(i)})
	}
	if r.IntN(5) == 0 {
		j["instance_id"] = pick(r, []string{"iid-1", "0123", "yes", "a: b"})
	}
	if r.IntN(4) == 0 {
		j["timezone"] = pick(r, []string{"Europe/Berlin", "UTC"})
	}
	if r.IntN(4) == 0 {
		j["locale"] = pick(r, []string{"de_DE.UTF-8", "C.UTF-8"})
	}
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAMmjD6jou8MNNJHmnk3ekQ6Tr9SBDqVj2q8F2+//2aG alice@example"
	if r.IntN(3) == 0 {
		j["ssh_authorized_keys"] = []string{key}
	}
	var users []any
	names := []string{"alice", "bob", "root", "svc_x"}
	r.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
	for n := range r.IntN(3) {
		u := map[string]any{"name": names[n]}
		switch r.IntN(4) {
		case 0:
			u["password"] = oneLine(r) + oneLine(r) + "pw"
		case 1:
			u["password_hash"] = "$6$vmpayloadsalt$jf4NtEi4E.EFJTf5fEbCw99yaS5cTNBTLoIzts4NR4DwK38jC3TdvOjJQcRbU9pmb2SRvE3lUqEzlJGATqDEM1"
		}
		if r.IntN(2) == 0 {
			u["sudo"] = pick(r, []string{"ALL=(ALL) NOPASSWD:ALL", "ALL=(ALL:ALL) ALL", "ALL=(root) NOPASSWD: /usr/bin/true"})
		}
		if r.IntN(2) == 0 {
			u["groups"] = []string{pick(r, []string{"adm", "sudo", "wheel"}), pick(r, []string{"yes", "y", "on", "null", "_x", "a-b"})}
		}
		if r.IntN(2) == 0 {
			u["shell"] = pick(r, []string{"/bin/bash", "/bin/sh"})
		}
		if r.IntN(2) == 0 {
			u["ssh_authorized_keys"] = []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOcBQu2aH9Blt7dB7Wce4DKmCgwGu2MficCfLxkoevTW ops@example"}
		}
		if names[n] == "root" {
			delete(u, "sudo")
			delete(u, "groups")
			delete(u, "shell")
		}
		if r.IntN(3) == 0 {
			u["lock_password"] = r.IntN(2) == 0
		}
		users = append(users, u)
	}
	if users != nil {
		j["users"] = users
	}
	var files []any
	nf := r.IntN(5)
	if i%40 == 7 {
		nf = 70 // over the size from which the hashes are derived apart
	}
	for k := range nf {
		f := map[string]any{"path": fmt.Sprintf("/srv/%s-%d", pick(r, []string{"a", "b c", "d#e", "x:y", "yes", "0644", "ü"}), k)}
		switch r.IntN(6) {
		case 0:
			f["content"] = bigText(r, 1000+r.IntN(5000))
		case 1:
			f["content"] = base64.StdEncoding.EncodeToString([]byte(bigText(r, r.IntN(9000))))
			f["encoding"] = "base64"
		default:
			f["content"] = oddText(r)
		}
		if nf == 70 {
			f["content"] = bigText(r, 4000)
			delete(f, "encoding")
		}
		if r.IntN(2) == 0 {
			f["permissions"] = pick(r, []string{"0644", "0600", "755", "01777"})
		}
		if r.IntN(3) == 0 {
			f["owner"] = pick(r, []string{"root:root", "alice:alice", "_apt:nogroup", "nobody:nogroup"})
		}
		files = append(files, f)
	}
	if files != nil {
		j["files"] = files
	}
	var runcmd []any
	for n := r.IntN(3); n > 0; n-- {
		if r.IntN(2) == 0 {
			runcmd = append(runcmd, oddText(r)+"x")
		} else {
			runcmd = append(runcmd, []string{"touch", oneLine(r) + "x"})
		}
	}
	if runcmd != nil {
		j["runcmd"] = runcmd
	}
	if r.IntN(3) == 0 {
		j["meta_data"] = map[string]any{pick(r, []string{"zone", "rack", "Ab_c", "a-b", "k1", "k10"}): oddText(r),
			"nested": map[string]any{"list": []any{oddText(r), 7, true, 1.5}, "s": pick(r, oddStrings)}}
	}
	if r.IntN(4) == 0 {
		j["nics"] = []any{map[string]any{"name": "eth0", "mac": "52:54:00:12:34:56", "mtu": 1500,
			"ipv4": map[string]any{"method": "static", "address": "192.0.2.10/24", "gateway": "192.0.2.1"},
			"ipv6": map[string]any{"method": "slaac"}}}
		if r.IntN(2) == 0 {
			j["dns"] = map[string]any{"nameservers": []string{"192.0.2.53"}, "search": []string{"example.com"}}
		}
	}
	switch r.IntN(6) {
	case 0:
		j["user_data"] = "#cloud-config\nruncmd: [" + strconv.Quote(oddText(r)) + "]\n"
	case 1:
		j["user_data"] = "#!/bin/sh\necho " + strconv.Quote(oddText(r)) + "\n"
	}
	if r.IntN(5) == 0 {
		j["power_state"] = map[string]any{"mode": pick(r, []string{"poweroff", "reboot"}), "message": oneLine(r) + "m",
			"delay_minutes": r.IntN(3)}
	}
	if r.IntN(6) == 0 {
		j["phone_home"] = map[string]any{"url": "http://192.0.2.1/" + pick(r, []string{"x", "a#b", "yes"})}
	}
	if r.IntN(6) == 0 {
		if r.IntN(2) == 0 {
			j["random_seed"] = map[string]any{"generate_bytes": 16}
		} else {
			j["random_seed"] = map[string]any{"data": "MDEyMzQ1Njc4OWFiY2RlZg=="}
		}
	}
	if r.IntN(6) == 0 {
		j["ssh_host_keys"] = []any{map[string]any{"type": "ed25519", "private_key_secret": "host-ed25519"}}
	}
	if r.IntN(6) == 0 {
		j["vendor_data"] = "#cloud-config\nruncmd: [" + strconv.Quote(oddText(r)) + "]\n"
	}
	if r.IntN(5) == 0 {
		j["guest_report"] = r.IntN(2) == 0
	}
	if j["user_data"] != nil && r.IntN(4) == 0 {
		// replace takes the user's user-data alone
		j = map[string]any{"version": 1, "user_data": j["user_data"], "user_data_mode": "replace",
			"format": j["format"], "hostname": j["hostname"], "meta_data": j["meta_data"]}
		for k, v := range j {
			if v == nil {
				delete(j, k)
			}
		}
	}
	return j
}
