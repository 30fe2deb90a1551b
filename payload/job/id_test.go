package job

import (
	"strings"
	"testing"
)

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
