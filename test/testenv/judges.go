package testenv

import (
	"os"
	"testing"
)

// JudgesEnv names the variable that make test sets to "required": a test
// whose judge (another project's reader, a tool or a source tree its
// output is compared with) is missing then fails instead of skipping, so
// CI never passes with a kind left unjudged.
const JudgesEnv = "VMPAYLOAD_JUDGES"

// MissingJudge stops tb because its judge is missing: it fails when
// VMPAYLOAD_JUDGES=required (make test), and skips otherwise. The message
// says what is missing and how to provide it.
func MissingJudge(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv(JudgesEnv) == "required" {
		tb.Fatalf(format+" ("+JudgesEnv+"=required, as make test sets it: every judge must run)", args...)
		return
	}
	tb.Skipf(format, args...)
}
