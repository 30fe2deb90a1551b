package main

import (
	"math"
	"path/filepath"
	"testing"
	"time"
)

// TestSlope: the least-squares slope over the second half of the
// submission period recovers a known line (standard error 0), ignores the
// first half and the samples after the period (the drain), honours keep,
// and gives a positive standard error for scattered samples.
func TestSlope(t *testing.T) {
	wall := 30 * time.Minute
	var ss []soakSample
	for i := 0; i <= 200; i++ { // every 10 s up to 33m20s
		at := time.Duration(i) * 10 * time.Second
		fds := 100 // first half: a different level, must not count
		if at >= wall/2 {
			fds = 20 + int(6*at.Hours()) // 6 per hour
		}
		if at > wall {
			fds = 1000 // drain: must not count
		}
		q := 0
		if i%2 == 1 {
			q = 50
		}
		ss = append(ss, soakSample{t: at, fds: fds, queue: q, goroutines: 20 + 3*(i%2)})
	}
	fds := func(s soakSample) float64 { return float64(s.fds) }
	// int() truncation makes the line a staircase: the fit is near 6/h.
	b, se, n := slope(ss, wall, nil, fds)
	if n != 91 || math.Abs(b-6) > 0.5 || se > 0.5 {
		t.Errorf("slope of fds = %.3f ± %.3f over %d samples, want ≈ 6 ± small over 91", b, se, n)
	}
	gor := func(s soakSample) float64 { return float64(s.goroutines) }
	if b, se, _ := slope(ss, wall, nil, gor); math.Abs(b) > 3*se || se == 0 {
		t.Errorf("alternating goroutines: slope %.3f ± %.3f, want 0 within its error, error > 0", b, se)
	}
	if b, se, n := slope(ss, wall, func(s soakSample) bool { return s.queue < 5 }, gor); n != 46 || b != 0 || se != 0 {
		t.Errorf("goroutines of the empty-queue samples: %.3f ± %.3f over %d, want exactly 0 ± 0 over 46", b, se, n)
	}
	if b, _, n := slope(ss[:3], wall, nil, fds); n != 0 || !math.IsNaN(b) {
		t.Errorf("no samples in the second half: %v over %d, want NaN over 0", b, n)
	}
}

// TestSoakCSV: the samples the soak writes read back as they were.
func TestSoakCSV(t *testing.T) {
	in := []soakSample{
		{t: 0, goroutines: -1},
		{t: 10*time.Second + 100*time.Millisecond, submitted: 701, results: 687, rss: 38 << 20, libvirtdRSS: 26 << 20, fds: 16,
			goroutines: 19, threads: 15, payloadEntries: 199, queue: 1, inflight: 3, reconnects: 2, restarts: 1},
	}
	p := filepath.Join(t.TempDir(), "s.csv")
	if err := writeSoakCSV(p, in); err != nil {
		t.Fatal(err)
	}
	out, err := readSoakCSV(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("read %d samples, wrote %d", len(out), len(in))
	}
	for i := range in {
		if out[i] != in[i] {
			t.Errorf("sample %d: read %+v, wrote %+v", i, out[i], in[i])
		}
	}
}
