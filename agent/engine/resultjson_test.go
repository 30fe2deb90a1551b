package engine

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/test/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestResultJSONGolden pins the result document the engine produces, byte
// for byte, for each kind of outcome: the JSON the spool's done/ and
// failed/ files and the API carry is a public contract. Paths and the
// domain's UUID, which change from run to run, are replaced by
// placeholders; everything else is the engine's own output.
func TestResultJSONGolden(t *testing.T) {
	received := time.Date(2026, 11, 23, 21, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		active bool
		// earlier: a job run first on the same domain
		earlier string
		doc     string
		// report: the engine's guest_report default
		report bool
	}{
		{name: "attach", doc: `{"version":1,"id":"g1","domain":"%s","hostname":"golden","action":"attach"}`},
		{name: "start-configdrive-vfat-report", doc: `{"version":1,"domain":"%s","hostname":"golden","format":"configdrive","media":"vfat","guest_report":true}`},
		{name: "reused", earlier: `{"version":1,"domain":"%s","hostname":"golden","action":"attach"}`,
			doc: `{"version":1,"domain":"%s","hostname":"golden","action":"attach"}`},
		{name: "change-running", active: true, earlier: `{"version":1,"domain":"%s","hostname":"before","action":"attach"}`,
			doc: `{"version":1,"domain":"%s","hostname":"golden","action":"attach"}`},
		{name: "prebuilt", doc: `{"version":1,"domain":"%s","prebuilt_image":"$SEEDS/seed.iso","action":"attach"}`},
		{name: "detach", earlier: `{"version":1,"domain":"%s","hostname":"golden","action":"attach"}`,
			doc: `{"version":1,"domain":"%s","action":"detach"}`},
		{name: "invalid", doc: `{"version":1,"domain":"%s","hostname":"golden","users":[{"name":"x","password_secret":"nope"}],"ssh_host_keys":[{"type":"ed25519","private_key_secret":"garbage"}]}`},
		{name: "invalid-host-key", doc: `{"version":1,"domain":"%s","hostname":"golden","ssh_host_keys":[{"type":"ed25519","private_key_secret":"garbage"}]}`},
		{name: "agent-report-default", report: true, doc: `{"version":1,"domain":"%s","hostname":"golden","action":"attach"}`},
		{name: "agent-report-off-by-job", report: true, doc: `{"version":1,"domain":"%s","hostname":"golden","action":"attach","guest_report":false}`},
		{name: "agent-report-prebuilt", report: true, doc: `{"version":1,"domain":"%s","prebuilt_image":"$SEEDS/seed.iso","action":"attach"}`},
		{name: "agent-report-replace-vendor-off", report: true, doc: `{"version":1,"domain":"%s","user_data_mode":"replace","user_data":"#cloud-config\nvendor_data: {enabled: false}\n"}`},
		{name: "domain-not-found", doc: `{"version":1,"domain":"missing-%s","hostname":"golden"}`},
		// issue 41: Ignition applies a config only on a first boot
		{name: "ignition-fwcfg-running-first-boot", active: true, earlier: `{"version":1,"domain":"%s","format":"ignition","hostname":"before","action":"attach"}`,
			doc: `{"version":1,"domain":"%s","format":"ignition","hostname":"golden","action":"attach"}`},
		{name: "ignition-blockdev-start", doc: `{"version":1,"domain":"%s","format":"ignition","ignition_delivery":"blockdev","hostname":"golden","action":"start"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := "golden-" + c.name
			f, d, e := fakeJobEngine(t, fakeDomainXML(name, false))
			seeds, secrets := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(secrets, "garbage"), []byte("not a key\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			e.PrebuiltDirs, e.SecretsDir, e.GuestReport = []string{seeds}, secrets, c.report
			expand := func(doc string) string {
				return strings.ReplaceAll(strings.ReplaceAll(doc, "%s", name), "$SEEDS", seeds)
			}
			if strings.Contains(c.doc, "prebuilt_image") {
				writeSeed(t, filepath.Join(seeds, "seed.iso"))
			}
			if c.earlier != "" {
				if r := runDoc(t, e, expand(c.earlier), "earlier"); r.State != result.StateDone {
					t.Fatalf("earlier job: %s %+v", r.State, r.Error)
				}
			}
			if c.active {
				f.SetActive(d.UUID, true)
			}
			j := expand(c.doc)
			r, err := e.Run(context.Background(), mustDecode(t, j), result.Result{ID: "golden", Source: "spool", ReceivedAt: received})
			if err != nil {
				t.Fatal(err)
			}
			r.Finish(received.Add(1500 * time.Millisecond))
			b, err := json.MarshalIndent(r, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got := strings.NewReplacer(e.PayloadDir, "$PAYLOAD", seeds, "$SEEDS", d.UUID, "$UUID").Replace(string(b)) + "\n"
			golden.Compare(t, filepath.Join("testdata", "result", c.name+".json"), []byte(got), *update)
		})
	}
}

func mustDecode(t *testing.T, doc string) *job.Job {
	t.Helper()
	j, rep := job.Parse([]byte(doc))
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	return j
}

// writeSeed writes a NoCloud seed image at p, as vmpayload build would.
func writeSeed(t *testing.T, p string) {
	t.Helper()
	j := &job.Job{Version: 1, Hostname: "prebuilt"}
	if _, err := payloadtest.Build(context.Background(), j, "", p, payload.Options{GID: -1, NoSync: true}); err != nil {
		t.Fatal(err)
	}
}
