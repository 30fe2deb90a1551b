package job

import (
	"regexp"
	"strings"
	"testing"
)

// TestNameForms holds the name forms the validator accepts at their edges:
// lengths, first and last characters, and a trailing newline (which `$`
// must not let through).
func TestNameForms(t *testing.T) {
	for _, c := range []struct {
		name   string
		re     func() *regexp.Regexp
		accept []string
		refuse []string
	}{
		{"user", userRE, []string{"a", "_", "alice", "a-b_1", strings.Repeat("a", 32)},
			[]string{"", "-a", "1a", "Alice", "é", strings.Repeat("a", 33), "a\n", "a b"}},
		{"ifname", ifnameRE, []string{"eth0", "_x", "0", "br-0.10", strings.Repeat("e", 15)},
			[]string{"", ".eth", "-x", strings.Repeat("e", 16), "eth:0", "eth0\n"}},
		{"label", labelRE, []string{"a", "a-b", "a--b", "host01", "0"},
			[]string{"", "-", "a-", "-a", "a.b", "a_b", "a\n"}},
		{"mac", macRE, []string{"52:54:00:12:34:56", "AA:bb:CC:dd:EE:ff"},
			[]string{"", "52:54:00:12:34:5", "52-54-00-12-34-56", "52:54:00:12:34:56:", "52:54:00:12:34:5g", "52:54:00:12:34:56\n"}},
		{"perm", permRE, []string{"644", "0644", "00644", "0755", "07555", "4755"},
			[]string{"", "64", "10644", "888", "0888", "777777", "rw-r--r--", "0644\n"}},
		{"secret", secretRE, []string{"a", "_a", "0", "db.pass", "a-b_c.d"},
			[]string{"", ".a", "-a", "a/b", "a b", "é", "a\n"}},
		{"crypt", cryptRE, []string{"$6$salt$hash", "$1$a", "$5$a", "$2a$10$abc", "$2b$x", "$2y$x", "$gy$j9T$x", "$y$j9T$x", "$7$x", "$6$./Az09$=,"},
			[]string{"", "$6$", "$2c$10$abc", "$8$x", "6$x", "$6$a b", "$6$a;", "$6$a\n"}},
		{"header line", headerLineRE, []string{":", " x", "\tx", "Content-Type: text/plain", "X-A~!:"},
			[]string{"", "From nobody", "no colon", "é:", "a\x7f:", "\x00:"}},
	} {
		for _, s := range c.accept {
			if !c.re().MatchString(s) {
				t.Errorf("%s: %q refused", c.name, s)
			}
		}
		for _, s := range c.refuse {
			if c.re().MatchString(s) {
				t.Errorf("%s: %q accepted", c.name, s)
			}
		}
	}
}

func TestValidID(t *testing.T) {
	for _, c := range []struct {
		id string
		ok bool
	}{
		{"web-1", true}, {"a..b", true}, {"A.b_c-9", true}, {"9", true},
		{"", false}, {".hidden", false}, {"_x", false}, {"-x", false}, {"a/b", false}, {"a b", false},
		{"é", false}, {strings.Repeat("a", MaxIDLen), true}, {strings.Repeat("a", MaxIDLen+1), false},
	} {
		if got := ValidID(c.id); got != c.ok {
			t.Errorf("ValidID(%q) = %v, want %v", c.id, got, c.ok)
		}
		// the job's id field agrees
		j := Job{Version: Version, ID: c.id}
		bad := false
		for _, e := range j.Validate().Errors {
			bad = bad || e.Field == "id"
		}
		if c.id != "" && bad == c.ok {
			t.Errorf("Validate of id %q: reported %v, ValidID %v", c.id, bad, c.ok)
		}
	}
}

func TestIDFrom(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"web-1", "web-1"}, {"a b", "a_b"}, {".x", "job.x"}, {"", "job"}, {"_", "job_"}, {"ü", "job__"},
		{strings.Repeat("x", 200), strings.Repeat("x", MaxIDLen)},
		{"-" + strings.Repeat("x", 200), "job-" + strings.Repeat("x", MaxIDLen-4)},
	} {
		got := IDFrom(c.in)
		if got != c.want {
			t.Errorf("IDFrom(%q) = %q, want %q", c.in, got, c.want)
		}
		if !ValidID(got) {
			t.Errorf("IDFrom(%q) = %q is not a valid id", c.in, got)
		}
	}
}
