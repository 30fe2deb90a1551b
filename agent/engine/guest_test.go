package engine

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/guestreport"
)

// TestGuestChannel: the report channel goes into the domain's definition
// with a payload that carries the reporter (the engine's default or the
// job's guest_report), leaves with one that does not, and with detach; the
// recipe records guest_report so a rebuild carries the reporter again.
func TestGuestChannel(t *testing.T) {
	h, err := libvirtx.OpenHost("test:///default", libvirtx.HostOptions{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx := context.Background()
	steps := []struct {
		name       string
		def        bool   // engine default
		field      string // the job's guest_report, "" for none
		action     string
		wantGuest  bool
		wantChanel bool
	}{
		{"default on", true, "", "attach", true, true},
		{"job turns it off", true, "false", "attach", false, false},
		{"job turns it on", false, "true", "attach", true, true},
		{"same again", false, "true", "attach", true, true},
		{"default off", false, "", "attach", false, false},
		{"on again", true, "", "attach", true, true},
		{"detach", true, "", "detach", false, false},
	}
	name := fmt.Sprintf("vmpx-engine-guest-%d", os.Getpid())
	defineTestDomain(t, h, name)
	for i, s := range steps {
		e := &Engine{Host: h, PayloadDir: t.TempDir(), ImageMode: 0o640, ImageGID: -1,
			Log: quietLog(), GuestReport: s.def}
		doc := fmt.Sprintf(`{"version":1,"domain":%q,"hostname":"h%d"`, name, i)
		if s.field != "" {
			doc += `,"guest_report":` + s.field
		}
		doc += fmt.Sprintf(`,"action":%q`, s.action)
		r := runDoc(t, e, doc+"}", fmt.Sprintf("g%d", i))
		if r.State != result.StateDone {
			t.Fatalf("%s: %s %+v", s.name, r.State, r.Error)
		}
		if (r.Guest != nil) != s.wantGuest || r.Guest != nil && (r.Guest.Status != result.GuestPending || r.Guest.Channel != guestreport.Channel) {
			t.Errorf("%s: guest section %+v, want one: %v", s.name, r.Guest, s.wantGuest)
		}
		d, err := h.Domain(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		has, err := hasGuestChannel(d.InactiveXML)
		if err != nil || has != s.wantChanel {
			t.Errorf("%s: channel in the definition %v (%v), want %v", s.name, has, err, s.wantChanel)
		}
		rc, ok := openedRecipe(t, d.InactiveXML)
		if s.action == "detach" {
			if ok {
				t.Errorf("%s: recipe left", s.name)
			}
			continue
		}
		if !ok || (rc.Job.GuestReport != nil && *rc.Job.GuestReport) != s.wantGuest {
			t.Errorf("%s: recipe %v guest_report %v, want %v", s.name, ok, rc.Job.GuestReport, s.wantGuest)
		}
	}
}

// hasGuestChannel reports whether domainXML has the guest report channel:
// whether removing it in a session of its own finds one.
func hasGuestChannel(domainXML string) (bool, error) {
	ed, err := domxml.NewEdit(domainXML)
	if err != nil {
		return false, err
	}
	return ed.RemoveGuestChannel(guestreport.Channel)
}
