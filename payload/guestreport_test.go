package payload_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/guestreport"
	"github.com/vmpayload/vmpayload/payload/job"
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
	{name: "replace-cloud-config", job: job.Job{Version: 1, Hostname: "gr4", UserDataMode: job.ModeReplace, UserData: "#cloud-config\nvendor_data: {enabled: false}\npackages: [jq]\n"}, wantConfig: []string{"packages"}},
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
			on, err := payload.Render(withReport(c.job, true), payload.Options{})
			if err != nil {
				t.Fatal(err)
			}
			off, err := payload.Render(withReport(c.job, false), payload.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if on.Docs.InstanceID != off.Docs.InstanceID {
				t.Errorf("instance-id %q with the report, %q without: turning it on must not make a new instance", on.Docs.InstanceID, off.Docs.InstanceID)
			}
			if on.Docs.ContentHash == off.Docs.ContentHash {
				t.Errorf("content hash %s with and without the report: the images differ", on.Docs.ContentHash)
			}
			ud := userDataOf(t, on)
			if !strings.Contains(ud, "Content-Type: text/cloud-boothook") || !strings.Contains(ud, guestreport.Channel) {
				t.Errorf("user-data has no reporter boothook:\n%s", ud)
			}
			if strings.Contains(userDataOf(t, off), guestreport.Channel) {
				t.Errorf("guest_report false still carries the reporter")
			}
			gp := filepath.Join("testdata", "guestreport", c.name+".user-data")
			if *update {
				if err := os.MkdirAll(filepath.Dir(gp), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(gp, []byte(ud), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			g, err := os.ReadFile(gp)
			if err != nil {
				t.Fatalf("golden file (run with -update): %v", err)
			}
			if string(g) != ud {
				t.Errorf("user-data differs from %s:\n--- got\n%s", gp, ud)
			}
		})
	}
}

func userDataOf(t *testing.T, r *payload.Rendered) string {
	t.Helper()
	for _, f := range r.Docs.Files {
		if f.Path == "user-data" || f.Path == "openstack/latest/user_data" {
			return string(f.Data)
		}
	}
	t.Fatalf("no user-data in %v", r.Docs.Files)
	return ""
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
			r, err := payload.Render(withReport(c.job, true), payload.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Write(ctx, out, payload.Options{GID: -1})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := judge.Judge(ctx, out)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Fatalf("cloud-init complains: %q", rep.AllErrors())
			}
			if rep.InstanceID != res.InstanceID {
				t.Errorf("instance-id %q, build said %q", rep.InstanceID, res.InstanceID)
			}
			var hooks int
			for _, s := range rep.Scripts {
				if s.ContentType == "text/cloud-boothook" && strings.Contains(s.Content, "/dev/virtio-ports/"+guestreport.Channel) {
					hooks++
				}
			}
			if hooks != 1 {
				t.Errorf("%d reporter boothooks among cloud-init's scripts %+v, want 1", hooks, rep.Scripts)
			}
			for _, want := range c.wantScripts {
				found := false
				for _, s := range rep.Scripts {
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
