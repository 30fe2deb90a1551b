package main

import (
	"fmt"
	"slices"
	"time"
)

// samples is a set of timings of one variant.
type samples []time.Duration

// pct returns the p-th percentile (nearest rank, 0 < p <= 100).
func (s samples) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(float64(len(c))*p/100+0.999999) - 1
	return c[min(max(i, 0), len(c)-1)]
}

// ms formats d in milliseconds with a precision that suits its size.
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f < 1:
		return fmt.Sprintf("%.3f", f)
	case f < 100:
		return fmt.Sprintf("%.2f", f)
	default:
		return fmt.Sprintf("%.0f", f)
	}
}

// ratio formats a/b as "N.Nx".
func ratio(a, b time.Duration) string {
	if b <= 0 || a <= 0 {
		return "–"
	}
	r := float64(a) / float64(b)
	if r >= 10 {
		return fmt.Sprintf("%.0fx", r)
	}
	return fmt.Sprintf("%.1fx", r)
}
