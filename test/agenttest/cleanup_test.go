package agenttest

import (
	"errors"
	"slices"
	"testing"
)

func TestCleanupsRunInReverseAndJoinErrors(t *testing.T) {
	errA, errC := errors.New("a failed"), errors.New("c failed")
	for _, c := range []struct {
		name     string
		steps    []error // what each step returns, in registration order
		wantRan  []int
		wantErrs []error
	}{
		{"none", nil, nil, nil},
		{"one ok", []error{nil}, []int{0}, nil},
		{"reverse order, all run despite failures", []error{errA, nil, errC}, []int{2, 1, 0}, []error{errA, errC}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cl Cleanups
			var ran []int
			for i, e := range c.steps {
				cl.Add(func() error { ran = append(ran, i); return e })
			}
			err := cl.Run()
			if !slices.Equal(ran, c.wantRan) {
				t.Errorf("ran %v, want %v", ran, c.wantRan)
			}
			if (err == nil) != (len(c.wantErrs) == 0) {
				t.Fatalf("Run() = %v, want errors %v", err, c.wantErrs)
			}
			for _, w := range c.wantErrs {
				if !errors.Is(err, w) {
					t.Errorf("Run() = %v, lacks %v", err, w)
				}
			}
			if err := cl.Run(); err != nil || len(ran) != len(c.wantRan) {
				t.Errorf("second Run: %v, ran %v; want nothing run again", err, ran)
			}
		})
	}
}
