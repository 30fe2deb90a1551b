package mallocarena

import (
	"os"
	"strings"
	"testing"
)

// TestCapLeavesTheOperatorsChoice: an arena cap set in the environment
// wins; a nonsense cap is refused; otherwise glibc takes the cap (mallopt
// reports success). What the cap saves is measured by the burst benchmark
// (test/bench), not here: glibc reuses the arenas of a test binary's
// threads, so a count of arenas in a test proves nothing.
func TestCapLeavesTheOperatorsChoice(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name               string
		arenaMax, tunables *string
		n                  int
		want               bool
	}{
		{"operator's MALLOC_ARENA_MAX", s("8"), nil, 2, false},
		{"operator's tunable", nil, s("glibc.malloc.arena_max=8"), 2, false},
		{"other tunables only", nil, s("glibc.malloc.tcache_count=0"), 2, true},
		{"empty MALLOC_ARENA_MAX", s(""), nil, 2, true},
		{"zero", nil, nil, 0, false},
		{"unset", nil, nil, Max, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := capArenas(tc.arenaMax, tc.tunables, tc.n); got != tc.want {
				t.Errorf("cap %d = %v, want %v", tc.n, got, tc.want)
			}
		})
	}
}

// TestCappedAtLoad: the constructor ran when this test binary was loaded.
func TestCappedAtLoad(t *testing.T) {
	env := os.Getenv("MALLOC_ARENA_MAX")
	want := env == "" && !strings.Contains(os.Getenv("GLIBC_TUNABLES"), "glibc.malloc.arena_max")
	if Capped() != want {
		t.Errorf("Capped() = %v, want %v (MALLOC_ARENA_MAX %q)", Capped(), want, env)
	}
}
