package libvirtx

import (
	"context"
	"errors"
	"testing"
	"time"
)

// countHost counts DefineXML calls; redefHost adds Redefine.
type countHost struct {
	scriptHost
	defines int
}

func (c *countHost) DefineXML(ctx context.Context, x string) (DomainInfo, error) {
	c.defines++
	return c.scriptHost.DefineXML(ctx, x)
}

type redefHost struct {
	countHost
	redefines int
}

func (r *redefHost) Redefine(ctx context.Context, x string) error {
	r.redefines++
	return r.err
}

func TestRedefine(t *testing.T) {
	errLibvirt := errors.New("refused")
	cases := []struct {
		name                     string
		redefiner, bounded       bool
		err                      error
		wantDefines, wantRedefin int
	}{
		{"host without Redefine: DefineXML", false, false, nil, 1, 0},
		{"host with Redefine: no read-back", true, false, nil, 0, 1},
		{"bounded host with Redefine", true, true, nil, 0, 1},
		{"bounded host without Redefine", false, true, nil, 1, 0},
		{"error passed on (Redefine)", true, true, errLibvirt, 0, 1},
		{"error passed on (DefineXML)", false, false, errLibvirt, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h Host
			var ch *countHost
			var rh *redefHost
			if tc.redefiner {
				rh = &redefHost{}
				rh.err = tc.err
				ch, h = &rh.countHost, rh
			} else {
				ch = &countHost{}
				ch.err = tc.err
				h = ch
			}
			if tc.bounded {
				h = Bounded(h, time.Minute, nil)
			}
			err := Redefine(context.Background(), h, "<domain/>")
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			redefines := 0
			if rh != nil {
				redefines = rh.redefines
			}
			if ch.defines != tc.wantDefines || redefines != tc.wantRedefin {
				t.Fatalf("DefineXML %d, Redefine %d calls; want %d, %d", ch.defines, redefines, tc.wantDefines, tc.wantRedefin)
			}
		})
	}
}
