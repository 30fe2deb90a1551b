package testenv

import (
	"strings"
	"testing"
)

// Contains fails tb, without stopping it, for each string of want that s
// lacks and each of notWant that s has; what names s in the messages
// ("the definition", "build output").
func Contains(tb testing.TB, what, s string, want, notWant []string) {
	tb.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			tb.Errorf("%s lacks %s:\n%s", what, w, s)
		}
	}
	for _, w := range notWant {
		if strings.Contains(s, w) {
			tb.Errorf("%s has %s:\n%s", what, w, s)
		}
	}
}
