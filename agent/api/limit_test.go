package api

import (
	"os"
	"testing"
)

// TestLimiter: a non-root uid stops at perUID, non-root uids together at
// total-perUID, and root (uid 0) takes the reserve up to total; releasing
// frees the slot for the same uid.
func TestLimiter(t *testing.T) {
	if os.Geteuid() == 1001 || os.Geteuid() == 1002 {
		t.Skip("uids 1001 and 1002 stand for other users here")
	}
	l := newLimiter(10, 3)
	steps := []struct {
		uid  uint32
		n    int
		want string // of the last acquire
	}{
		{1001, 3, ""},
		{1001, 1, refuseUID},
		{1002, 3, ""},
		{1003, 1, ""},
		{1004, 1, refuseTotal}, // 7 = 10 - 3 held by non-root uids
		{0, 3, ""},             // root's reserve
		{0, 1, refuseTotal},    // 10 in all
	}
	for i, s := range steps {
		var got string
		for range s.n {
			if got = l.acquire(s.uid); got != "" {
				break
			}
		}
		if got != s.want {
			t.Fatalf("step %d: uid %d: %q, want %q", i, s.uid, got, s.want)
		}
	}
	if l.held() != 10 {
		t.Fatalf("held %d, want 10", l.held())
	}
	l.release(1001)
	if got := l.acquire(1001); got != "" {
		t.Errorf("after a release uid 1001 got %q", got)
	}
	l.release(0)
	if got := l.acquire(1004); got != refuseTotal {
		t.Errorf("root's freed slot went to a non-root uid (%q)", got)
	}
}
