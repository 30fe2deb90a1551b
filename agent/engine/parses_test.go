package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// TestJobParses counts the domain documents the engine parses per job
// (domxml.Parses, less the fake host's own parse of each definition it
// is given). A stopped domain's job reads the definition it looked up
// once for its edit session (drive, channel, recipe: the recipe is read
// from the session) and once for the fw_cfg entries an earlier job may
// have left (run's ownedFwCfgFiles); a running domain's medium change
// reads the definition twice the same way, the live definition once and
// the definition libvirt returns after the change once. Before the one
// domain document (a second decode per FindPayload, a token scan per
// recipe read) the three jobs took 3, 4 and 7. Not parallel: the counter
// is the process's.
func TestJobParses(t *testing.T) {
	cases := []struct {
		name           string
		active, second bool
		want           int64
	}{
		{name: "stopped, first job", want: 2},
		{name: "stopped, job replacing a recipe", second: true, want: 2},
		{name: "running, medium change", active: true, second: true, want: 4},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("parses-%d", i)
			f, d, e := fakeJobEngine(t, fakeDomainXML(name, false))
			doc := func(host string) string {
				return fmt.Sprintf(`{"version":1,"domain":%q,"hostname":%q,"action":"attach"}`, name, host)
			}
			if c.second {
				if r := runDoc(t, e, doc("earlier"), "earlier"); r.State != result.StateDone {
					t.Fatalf("earlier job: %s %+v", r.State, r.Error)
				}
			}
			if c.active {
				if err := f.Start(context.Background(), d.UUID); err != nil {
					t.Fatal(err)
				}
			}
			calls := len(f.Calls())
			before := domxml.Parses()
			if r := runDoc(t, e, doc("now"), "now"); r.State != result.StateDone {
				t.Fatalf("job: %s %+v", r.State, r.Error)
			}
			parsed := domxml.Parses() - before
			for _, call := range f.Calls()[calls:] {
				if call.Method == "DefineXML" {
					parsed-- // the fake host reads the UUID of what it is given
				}
			}
			t.Logf("%s: %d parses", c.name, parsed)
			if parsed > c.want {
				t.Errorf("the job parsed %d domain documents, want at most %d", parsed, c.want)
			}
		})
	}
}
