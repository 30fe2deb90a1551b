package engine

import (
	"context"
	"os"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/libvirtx/libvirtxtest"
	"github.com/vmpayload/vmpayload/payload/job"
)

// TestDeliverySwitchKeepsPayload: when a job moves the same Ignition
// config from one delivery to another (fw_cfg → blockdev drive and back)
// on a stopped domain, the file the new delivery attached stays, and the
// definition names it once, by the new delivery only.
func TestDeliverySwitchKeepsPayload(t *testing.T) {
	f := libvirtxtest.New()
	dom, err := f.DefineXML(context.Background(), archDomainXML("deliv-switch", "x86_64", "pc", true, false))
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{Host: f, PayloadDir: t.TempDir(), ImageGID: -1, Log: quietLog(), Cleanups: &Cleanups{}}
	for i, d := range []job.IgnitionDelivery{job.DeliveryFwCfg, job.DeliveryBlockdev, job.DeliveryFwCfg} {
		j := &job.Job{Version: 1, Domain: dom.UUID, Action: job.ActionAttach, Format: job.FormatIgnition, Hostname: "switch.example.com", IgnitionDelivery: d}
		r, err := e.Run(context.Background(), j, result.Result{ID: "switch"})
		if err != nil || r.State != result.StateDone {
			t.Fatalf("job %d (%s): %s %+v %v", i, d, r.State, r.Error, err)
		}
		if _, err := os.Stat(r.Payload.Path); err != nil {
			t.Errorf("job %d (%s): the attached payload file is gone: %v", i, d, err)
		}
		x := f.XML(dom.UUID)
		doc, err := domxml.Read(x)
		if err != nil {
			t.Fatal(err)
		}
		files := doc.ReferencedFiles()
		if len(files) != 1 || files[0] != r.Payload.Path {
			t.Errorf("job %d (%s): the definition names %v, want only %s", i, d, files, r.Payload.Path)
		}
		_, drive, _ := domxml.FindPayload(x)
		ents, _ := domxml.FwCfgEntries(x)
		if drive != (d == job.DeliveryBlockdev) || (len(ents) > 0) != (d == job.DeliveryFwCfg) {
			t.Errorf("job %d (%s): drive %v, fw_cfg entries %v", i, d, drive, ents)
		}
	}
}
