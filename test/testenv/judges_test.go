package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// stopTB records how MissingJudge stops a test.
type stopTB struct {
	testing.TB
	how, msg string
}

func (s *stopTB) Helper()                   {}
func (s *stopTB) Fatalf(f string, a ...any) { s.how, s.msg = "fail", fmt.Sprintf(f, a...) }
func (s *stopTB) Skipf(f string, a ...any)  { s.how, s.msg = "skip", fmt.Sprintf(f, a...) }

// TestMissingJudge: a missing judge skips the test, unless
// VMPAYLOAD_JUDGES=required (make test), where it fails it.
func TestMissingJudge(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"", "skip"}, {"0", "skip"}, {"required", "fail"},
	} {
		t.Setenv(JudgesEnv, tc.env)
		s := &stopTB{TB: t}
		MissingJudge(s, "no %s here", "judge")
		if s.how != tc.want || !strings.HasPrefix(s.msg, "no judge here") {
			t.Errorf("%s=%q: %s %q; want %s", JudgesEnv, tc.env, s.how, s.msg, tc.want)
		}
	}
}
