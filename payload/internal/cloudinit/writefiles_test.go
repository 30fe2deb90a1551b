package cloudinit

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// testKey stands for a content hash.
var testKey = strings.Repeat("0f", 32)

// scalarCases are strings around every rule of go-yaml's scalar analysis
// and resolver; fast says whether inClass must take them (the others
// must be refused, so that the whole config goes through go-yaml).
var scalarCases = []struct {
	s    string
	fast bool
}{
	// plain
	{"/etc/motd", true},
	{"/srv/data/file-001.txt", true},
	{"/etc/systemd/system/getty@tty1.service.d/override.conf", true},
	{"/a#b", true},
	{"/a:b", true},
	{"/a,b[c]{d}?e", true},
	{"/it's", true},
	{`/say"hi"`, true},
	{"/a|b>c", true},
	{"/x.", true},
	{"/...", true},
	{"/-", true},
	{"/~", true},
	{"/%41", true},
	{"/`cmd`", true},
	{"/*star", true},
	{"/&anchor", true},
	{"/!tag", true},
	{"/@", true},
	{"/a\\b", true},
	{"b64", true},
	{"root:root", true},
	{"alice:alice", true},
	{"alice", true},
	{"_apt:nogroup", true},
	{"a:b:c", true},
	{"AAECAwQFBgcICQ==", true},
	{"Zm9v+/8=", true},
	{"vmpayload-content-" + testKey + "-000001", true},
	{"yes2", true},
	{"nope", true},
	{"Truee", true},
	{"o", true},
	{"Inf", true},
	{"NaN", true},
	{"e5", true},
	{"x:", false}, // ':' at the end: quoted
	// quoted, as go-yaml quotes them
	{"", true},
	{"0644", true},
	{"0600", true},
	{"01777", true},
	{"0000", true},
	{"644", true},
	{"1777", true},
	{"0855", true}, // not octal: a float
	{"9", true},
	{"12345678", true},
	{"123456789", true},
	{"123456789012345678", true},
	{"1234567890123456789", false},
	// YAML 1.1 booleans and the words that resolve to bool or null: quoted
	{"yes", true}, {"Yes", true}, {"YES", true}, {"no", true}, {"No", true}, {"NO", true},
	{"on", true}, {"On", true}, {"ON", true}, {"off", true}, {"Off", true}, {"OFF", true},
	{"y", true}, {"Y", true}, {"n", true}, {"N", true},
	{"true", true}, {"True", true}, {"TRUE", true}, {"false", true}, {"False", true}, {"FALSE", true},
	{"null", true}, {"Null", true}, {"NULL", true},
	// base-60 numbers quoted; other digit-first strings with ':' plain
	{"1:20", true}, {"1000:1000", true}, {"52:54:00:ab:cd:ef", true},
	// other numbers and the rest of the resolver's words: refused
	{"~", false},
	{"1e3", false}, {"0x1F", false}, {"0o17", false}, {"0b101", false}, {"1_000", false},
	{".inf", false}, {"-.inf", false}, {".nan", false}, {".5", false}, {"+1", false}, {"-1", false},
	{"2001-12-14", false}, {"<<", false},
	// inner spaces are plain; indicators and other whitespace: refused
	{"/a b", true}, {"a  b c", true}, {"/a #b", false}, {"/a: b", false}, {" /a", false}, {"/a ", false},
	{"/a\tb", false}, {"/a\nb", false}, {"text\n", false}, {"/\x7f", false}, {"/\x00", false},
	{"/ünïcödé", false}, {"/€", false},
	{"-a", false}, {"- a", false}, {"--- a", false}, {"---", false}, {"...", false}, {"?a", false},
	{":a", false}, {"#a", false}, {"&a", false}, {"*a", false}, {"!a", false}, {"|a", false},
	{">a", false}, {"%a", false}, {"@a", false}, {"`a", false}, {"'a'", false}, {`"a"`, false},
	{"[a]", false}, {"{a}", false}, {",a", false}, {".a", false}, {"1a", false}, {"0644 ", false},
}

// goYAMLValue is how go-yaml, set up as marshalYAML sets it up, writes s as
// the value of a top-level key ("v: " and the line break removed).
func goYAMLValue(t testing.TB, s string) string {
	t.Helper()
	b, err := goYAML(struct {
		V string `yaml:"v"`
	}{s})
	if err != nil {
		t.Fatalf("go-yaml refused %q: %v", s, err)
	}
	out, ok := strings.CutPrefix(string(b), "v: ")
	if !ok || !strings.HasSuffix(out, "\n") {
		return "\x00unexpected: " + string(b)
	}
	return strings.TrimSuffix(out, "\n")
}

func TestScalarClassAgreesWithGoYAML(t *testing.T) {
	for _, tc := range scalarCases {
		ok := inClass(tc.s)
		got := appendScalar(nil, tc.s)
		if ok != tc.fast {
			t.Errorf("inClass(%q) = %v, want %v", tc.s, ok, tc.fast)
		}
		if ok {
			if want := goYAMLValue(t, tc.s); string(got) != want {
				t.Errorf("appendScalar(%q) = %s, go-yaml writes %s", tc.s, got, want)
			}
		}
	}
}

// randomString draws strings that hit go-yaml's rules often: fragments of
// indicators, reserved words, digits and separators, and single bytes of
// every kind.
func randomString(r *rand.Rand) string {
	frags := []string{"/", "/etc", "a", "Z", "_", "0", "7", "9", ".", "-", "+", "=", ":", "#", " ", "\t", "\n",
		"'", `"`, "\\", ",", "[", "]", "{", "}", "?", "*", "&", "!", "|", ">", "%", "@", "`", "~", "<<",
		"yes", "no", "on", "off", "y", "n", "true", "False", "null", "NULL", ".inf", ".nan", "1e3", "0x1F",
		"0o7", "0b1", "1_0", "1:20", "2001-12-14", "---", "...", "ü", "€", "\x7f", "\x00", "root:root", "b64"}
	var b strings.Builder
	n := r.IntN(5)
	if r.IntN(4) == 0 {
		n = 1
	}
	for range n {
		switch r.IntN(4) {
		case 0:
			b.WriteByte(byte(r.IntN(128)))
		default:
			b.WriteString(frags[r.IntN(len(frags))])
		}
	}
	return b.String()
}

func TestScalarClassAgreesWithGoYAMLRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 2))
	taken := 0
	const n = 20000
	for range n {
		s := randomString(r)
		if !inClass(s) {
			continue
		}
		got := appendScalar(nil, s)
		taken++
		if want := goYAMLValue(t, s); string(got) != want {
			t.Fatalf("appendScalar(%q) = %s, go-yaml writes %s", s, got, want)
		}
	}
	// the generator must exercise both sides of the class
	if taken < n/10 || taken > n*9/10 {
		t.Fatalf("%d of %d random strings in the class: the generator misses a side", taken, n)
	}
}

// checkEncodeCloudConfig compares encodeCloudConfig with go-yaml's
// encoding of cc and returns whether the fast path was taken.
func checkEncodeCloudConfig(t testing.TB, cc *CloudConfig) bool {
	t.Helper()
	want, err := goYAML(cc)
	if err != nil {
		t.Fatal(err)
	}
	got, fast, err := encodeCloudConfig(cc, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("fast=%v: the document differs from go-yaml's\n--- got\n%s\n--- go-yaml\n%s", fast, got, want)
	}
	return fast
}

func TestEncodeCloudConfigAgreesWithGoYAML(t *testing.T) {
	plain := []WriteFile{
		{Path: "/srv/a", Content: "vmpayload-content-" + testKey + "-000000", Encoding: "b64"},
		{Path: "/srv/b", Content: "AAECAwQFBgcICQ==", Encoding: "b64", Permissions: "0600", Owner: "alice:alice", Defer: true},
		{Path: "/srv/c", Content: "", Permissions: "0644", Owner: "root:root"},
		{Path: "/srv/d", Content: "oneline"},
	}
	with := func(extra ...WriteFile) []WriteFile { return append(append([]WriteFile{}, plain...), extra...) }
	users := []any{"default", User{Name: "alice", Groups: []string{"adm"}, Shell: "/bin/bash", LockPasswd: true}}
	for _, tc := range []struct {
		name string
		cc   CloudConfig
		fast bool
	}{
		{"write_files only", CloudConfig{WriteFiles: plain}, true},
		{"one entry", CloudConfig{WriteFiles: plain[:1]}, true},
		{"between other keys", CloudConfig{Hostname: "h", FQDN: "h.example", ManageEtcHosts: ptr(true), Users: users,
			WriteFiles: plain, Runcmd: []any{"echo hi", []string{"touch", "/x"}},
			PowerState: &PowerState{Mode: "poweroff", Delay: "now"}}, true},
		{"after a literal block with keep chomping", CloudConfig{Users: []any{User{Name: "a", Passwd: "x\n\n"}}, WriteFiles: plain, Runcmd: []any{"a\n\n"}}, true},
		{"followed by phone_home", CloudConfig{WriteFiles: plain, PhoneHome: &PhoneHome{URL: "http://h/", Post: "all"}}, true},
		{"multi-line content", CloudConfig{Hostname: "h", WriteFiles: with(WriteFile{Path: "/m", Content: "a\nb\n"})}, false},
		{"path with a space", CloudConfig{WriteFiles: with(WriteFile{Path: "/a b", Content: "x"})}, true},
		{"unicode path", CloudConfig{WriteFiles: with(WriteFile{Path: "/ü", Content: "x"})}, false},
		{"numeric owner", CloudConfig{WriteFiles: with(WriteFile{Path: "/o", Content: "x", Owner: "1000:1000"})}, true},
		{"base-60 owner, quoted", CloudConfig{WriteFiles: with(WriteFile{Path: "/o", Content: "x", Owner: "10:20"})}, true},
		{"content a boolean word, quoted", CloudConfig{WriteFiles: with(WriteFile{Path: "/o", Content: "yes"})}, true},
		{"path with a tab", CloudConfig{WriteFiles: with(WriteFile{Path: "/a\tb", Content: "x"})}, false},
		{"content a number", CloudConfig{WriteFiles: with(WriteFile{Path: "/o", Content: "1e3"})}, false},
		{"no write_files", CloudConfig{Hostname: "h"}, false},
		{"empty", CloudConfig{}, false},
		// a runcmd string that spells the placeholder entry: go-yaml
		// writes it quoted, and a second occurrence would be refused
		{"placeholder spelled elsewhere", CloudConfig{WriteFiles: plain, Runcmd: []any{"write_files:\n  - path: " + writeFilesPlaceholder + testKey + "\n    content: \"\"\n"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fast := checkEncodeCloudConfig(t, &tc.cc); fast != tc.fast {
				t.Errorf("fast path taken = %v, want %v", fast, tc.fast)
			}
		})
	}
}

func TestPlaceholderEntryRefusesDoubtfulDocuments(t *testing.T) {
	want, ok := appendWriteFiles(nil, []WriteFile{{Path: writeFilesPlaceholder + testKey}})
	if !ok {
		t.Fatal("the placeholder entry is not in the class")
	}
	w := string(want)
	for _, tc := range []struct {
		name string
		doc  string
		ok   bool
	}{
		{"first key", "write_files:\n" + w + "runcmd:\n  - x\n", true},
		{"later key", "hostname: h\nwrite_files:\n" + w, true},
		{"missing", "hostname: h\nwrite_files:\n  - path: /x\n", false},
		{"twice", "write_files:\n" + w + "x: |\n  write_files:\n" + w, false},
		{"not under write_files", "runcmd:\n" + w, false},
		{"nested key", "a:\n  write_files:\n" + w, false},
		{"more items follow", "write_files:\n" + w + "  - path: /x\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := placeholderEntry([]byte(tc.doc), want); ok != tc.ok {
				t.Errorf("placeholderEntry = %v, want %v", ok, tc.ok)
			}
		})
	}
}

// randomWriteFile draws an entry whose fields are often in the class and
// sometimes not.
func randomWriteFile(r *rand.Rand) WriteFile {
	pick := func(class []string) string {
		if r.IntN(5) == 0 {
			return randomString(r)
		}
		return class[r.IntN(len(class))]
	}
	wf := WriteFile{
		Path:    pick([]string{"/etc/motd", "/srv/x.conf", "/a/b@c.service", "/x:y", "/z#"}),
		Content: pick([]string{"", "vmpayload-content-" + testKey + "-000007", "AAECAwQFBgcICQ==", "hello", "0"}),
	}
	if r.IntN(2) == 0 {
		wf.Encoding = pick([]string{"b64"})
	}
	if r.IntN(2) == 0 {
		wf.Permissions = pick([]string{"0644", "0600", "0755", "01777", "0000"})
	}
	if r.IntN(2) == 0 {
		wf.Owner = pick([]string{"root:root", "alice:alice", "_apt:nogroup"})
	}
	wf.Defer = r.IntN(2) == 0
	return wf
}

func TestEncodeCloudConfigAgreesWithGoYAMLRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 3))
	fast := 0
	const n = 3000
	for range n {
		cc := CloudConfig{}
		if r.IntN(2) == 0 {
			cc.Hostname = "h"
		}
		if r.IntN(3) == 0 {
			cc.Runcmd = []any{randomString(r)}
		}
		for range 1 + r.IntN(4) {
			cc.WriteFiles = append(cc.WriteFiles, randomWriteFile(r))
		}
		if checkEncodeCloudConfig(t, &cc) {
			fast++
		}
	}
	if fast < n/10 || fast > n*9/10 {
		t.Fatalf("%d of %d random configs took the fast path: the generator misses a side", fast, n)
	}
}

// FuzzWriteFilesYAML holds encodeCloudConfig to go-yaml's bytes for any
// entry: either it is written identically or the fallback is taken.
func FuzzWriteFilesYAML(f *testing.F) {
	f.Add("/etc/motd", "hello", "b64", "0644", "root:root", true, "echo")
	f.Add("/a b", "x\ny\n", "", "644", "1000:1000", false, "")
	f.Add("/srv/x", "vmpayload-content-"+testKey+"-000000", "b64", "", "", false, "write_files:")
	f.Add("yes", "", "on", "0x1F", "a:", true, "- x")
	f.Fuzz(func(t *testing.T, path, content, encoding, perms, owner string, deferFlag bool, cmd string) {
		cc := CloudConfig{Hostname: "h", WriteFiles: []WriteFile{
			{Path: path, Content: content, Encoding: encoding, Permissions: perms, Owner: owner, Defer: deferFlag},
			{Path: "/fixed", Content: "b64", Encoding: "b64"},
		}}
		if cmd != "" {
			cc.Runcmd = []any{cmd}
		}
		checkEncodeCloudConfig(t, &cc)
	})
}

func BenchmarkEncodeCloudConfig(b *testing.B) {
	cc := CloudConfig{Hostname: "bench-01", ManageEtcHosts: ptr(true)}
	for i := range 200 {
		cc.WriteFiles = append(cc.WriteFiles, WriteFile{Path: "/srv/data/file-" + strings.Repeat("0", 3) + string(rune('a'+i%26)) + ".txt",
			Content: "vmpayload-content-" + testKey + "-000000", Encoding: "b64"})
	}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, fast, err := encodeCloudConfig(&cc, testKey); err != nil || !fast {
				b.Fatal(fast, err)
			}
		}
	})
	b.Run("go-yaml", func(b *testing.B) {
		for b.Loop() {
			if _, err := goYAML(&cc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
