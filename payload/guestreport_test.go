package payload_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/guestreport"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/test/judge"
)

// guestReportCases are jobs with the guest reporter in every user-data
// shape and mode, for both formats.
var guestReportCases = []struct {
	name string
	job  job.Job
	// wantScripts are texts of script parts the user gave, which must
	// survive next to the reporter; wantConfig are keys of the merged
	// cloud-config.
	wantScripts []string
	wantConfig  []string
}{
	{name: "generated-only", job: job.Job{Version: 1, Hostname: "gr1", Runcmd: []job.Command{{Shell: "echo generated"}}}, wantConfig: []string{"runcmd"}},
	{name: "merge-cloud-config", job: job.Job{Version: 1, Hostname: "gr2", Timezone: "UTC", UserData: "#cloud-config\npackages: [jq]\n"}, wantConfig: []string{"packages", "timezone"}},
	{name: "merge-script", job: job.Job{Version: 1, Hostname: "gr3", Timezone: "UTC", UserData: "#!/bin/sh\necho user script\n"}, wantScripts: []string{"echo user script"}, wantConfig: []string{"timezone"}},
	{name: "replace-cloud-config", job: job.Job{Version: 1, Hostname: "gr4", UserDataMode: job.ModeReplace, UserData: "#cloud-config\npackages: [jq]\n"}, wantConfig: []string{"packages"}},
	{name: "replace-with-vendor-data", job: job.Job{Version: 1, Hostname: "gr8", UserDataMode: job.ModeReplace, UserData: "#!/bin/sh\necho replaced\n", VendorData: "#!/bin/sh\necho vendor\n"}, wantScripts: []string{"echo replaced", "echo vendor"}},
	{name: "replace-script", job: job.Job{Version: 1, Hostname: "gr5", UserDataMode: job.ModeReplace, UserData: "#!/bin/sh\necho replaced\n"}, wantScripts: []string{"echo replaced"}},
	{name: "replace-multipart", job: job.Job{Version: 1, Hostname: "gr6", UserDataMode: job.ModeReplace, UserData: "Content-Type: multipart/mixed; boundary=\"XX\"\nMIME-Version: 1.0\n\n--XX\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho part one\n--XX\nContent-Type: text/cloud-config\n\n#cloud-config\nruncmd: [[echo, two]]\n--XX--\n"}, wantScripts: []string{"echo part one"}, wantConfig: []string{"runcmd"}},
	{name: "configdrive", job: job.Job{Version: 1, Format: job.FormatConfigDrive, Hostname: "gr7", UserData: "#cloud-config\npackages: [jq]\n"}, wantConfig: []string{"packages"}},
}

func withReport(j job.Job, on bool) *job.Job {
	j.GuestReport = &on
	return &j
}

// TestGuestReportRendered checks the rendered user-data of every case
// against its golden file (-update rewrites them) and that turning the
// report on changes the content hash but not the instance-id.
func TestGuestReportRendered(t *testing.T) {
	for _, c := range guestReportCases {
		t.Run(c.name, func(t *testing.T) {
			on, err := payloadtest.Render(withReport(c.job, true), "", payload.Options{})
			if err != nil {
				t.Fatal(err)
			}
			off, err := payloadtest.Render(withReport(c.job, false), "", payload.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if on.Docs.InstanceID != off.Docs.InstanceID {
				t.Errorf("instance-id %q with the report, %q without: turning it on must not make a new instance", on.Docs.InstanceID, off.Docs.InstanceID)
			}
			if on.Docs.ContentHash == off.Docs.ContentHash {
				t.Errorf("content hash %s with and without the report: the images differ", on.Docs.ContentHash)
			}
			ud, vd := docOf(on, "user-data"), docOf(on, "vendor-data")
			carrier := ud
			if c.job.UserDataMode == job.ModeReplace {
				// replace keeps the user-data verbatim: vendor-data carries it
				carrier = vd
				if ud != c.job.UserData {
					t.Errorf("replace mode: user-data is not verbatim:\n%s", ud)
				}
			}
			if !strings.Contains(carrier, "Content-Type: text/cloud-boothook") || !strings.Contains(carrier, guestreport.Channel) {
				t.Errorf("no reporter boothook in:\n%s", carrier)
			}
			if strings.Contains(docOf(off, "user-data")+docOf(off, "vendor-data"), guestreport.Channel) {
				t.Errorf("guest_report false still carries the reporter")
			}
			for kind, doc := range map[string]string{"user-data": ud, "vendor-data": vd} {
				gp := filepath.Join("testdata", "guestreport", c.name+"."+kind)
				if *update {
					_ = os.Remove(gp)
					if doc != "" {
						if err := os.MkdirAll(filepath.Dir(gp), 0o755); err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(gp, []byte(doc), 0o644); err != nil {
							t.Fatal(err)
						}
					}
				}
				g, err := os.ReadFile(gp)
				if os.IsNotExist(err) && doc == "" {
					continue
				}
				if err != nil {
					t.Fatalf("golden file (run with -update): %v", err)
				}
				if string(g) != doc {
					t.Errorf("%s differs from %s:\n--- got\n%s", kind, gp, doc)
				}
			}
		})
	}
}

// docOf returns the rendered user-data or vendor-data ("" when there is
// none), in either format.
func docOf(r *payload.Rendered, kind string) string {
	for _, f := range r.Docs.Files {
		switch {
		case f.Path == kind, kind == "user-data" && f.Path == "openstack/latest/user_data":
			return string(f.Data)
		case kind == "vendor-data" && f.Path == "openstack/latest/vendor_data.json":
			var m map[string]string
			if err := json.Unmarshal(f.Data, &m); err == nil {
				return m["cloud-init"]
			}
		}
	}
	return ""
}

// TestGuestReportVendorDataOff: in replace mode a cloud-config that turns
// vendor-data off would drop the reporter; that is refused, naming
// guest_report, rather than left to a silent timeout.
func TestGuestReportVendorDataOff(t *testing.T) {
	j := job.Job{Version: 1, Hostname: "gr9", UserDataMode: job.ModeReplace, UserData: "#cloud-config\nvendor_data: {enabled: false}\n"}
	_, err := payloadtest.Render(withReport(j, true), "", payload.Options{})
	var ve *job.ValidationError
	if !errors.As(err, &ve) || ve.Errors[0].Field != "guest_report" || ve.Errors[0].Code != job.CodeConflict {
		t.Fatalf("err %v, want a guest_report conflict", err)
	}
	if _, err := payloadtest.Render(withReport(j, false), "", payload.Options{}); err != nil {
		t.Fatalf("without the report: %v", err)
	}
}

// TestGuestReportJudgedByCloudInit has real cloud-init read each image: the
// reporter is a boothook part it runs, the user's scripts and cloud-config
// come through beside it, and nothing is reported as an error.
func TestGuestReportJudgedByCloudInit(t *testing.T) {
	ctx := context.Background()
	if err := judge.CheckEnvironment(ctx); err != nil {
		t.Fatalf("the cloud-init judge cannot run here (make test installs it): %v", err)
	}
	for _, c := range guestReportCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "seed.iso")
			res, rep := judgeImage(t, ctx, withReport(c.job, true), "", out)
			if !rep.OK() {
				t.Fatalf("cloud-init complains: %q", rep.AllErrors())
			}
			if rep.InstanceID != res.InstanceID {
				t.Errorf("instance-id %q, build said %q", rep.InstanceID, res.InstanceID)
			}
			var hooks int
			scripts := append([]judge.Script(nil), rep.Scripts...)
			if rep.VendorData != nil {
				scripts = append(scripts, rep.VendorData.Scripts...)
			}
			for _, s := range scripts {
				if s.ContentType == "text/cloud-boothook" && strings.Contains(s.Content, "/dev/virtio-ports/"+guestreport.Channel) {
					hooks++
				}
			}
			if hooks != 1 {
				t.Errorf("%d reporter boothooks among cloud-init's scripts %+v, want 1", hooks, scripts)
			}
			for _, want := range c.wantScripts {
				found := false
				for _, s := range scripts {
					found = found || strings.Contains(s.Content, want)
				}
				if !found {
					t.Errorf("user script %q lost: scripts %+v", want, rep.Scripts)
				}
			}
			for _, k := range c.wantConfig {
				if _, ok := rep.MergedCloudConfig[k]; !ok {
					t.Errorf("cloud-config key %q lost: merged %v", k, rep.MergedCloudConfig)
				}
			}
		})
	}
}
