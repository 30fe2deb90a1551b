package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload"
	jobpkg "github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// recipeDomain is a test-driver domain whose definition carries the recipe
// of an image built before the agent starts (as after a host reboot).
type recipeDomain struct {
	name, uuid string
	job        *jobpkg.Job
	drive      bool // the payload drive references the image
	removeImg  bool // the image is gone when the agent starts
	want       string
	res        payload.Result
}

// TestStartupRebuildFromRecipes: when the agent starts, a missing image
// whose domain carries a recipe is rebuilt with the recorded sha256, an
// image named only by a recipe survives orphan collection, and a recipe
// whose secret vanished fails alone: the agent runs and takes jobs.
func TestStartupRebuildFromRecipes(t *testing.T) {
	doms := []*recipeDomain{
		{name: "vm-rec-missing", uuid: "0b0f4c1e-5a55-4d2b-9c61-000000000001", drive: true, removeImg: true, want: "rebuilt",
			job: &jobpkg.Job{Version: 1, Domain: "vm-rec-missing", Hostname: "missing", Users: []jobpkg.User{{Name: "alice", Password: "Plain-Startup-Pw"}}}},
		{name: "vm-rec-secret", uuid: "0b0f4c1e-5a55-4d2b-9c61-000000000002", drive: true, removeImg: true, want: "error",
			job: &jobpkg.Job{Version: 1, Domain: "vm-rec-secret", Hostname: "secret", Users: []jobpkg.User{{Name: "bob", PasswordSecret: "vanished"}}}},
		{name: "vm-rec-only", uuid: "0b0f4c1e-5a55-4d2b-9c61-000000000003", drive: false, want: "kept",
			job: &jobpkg.Job{Version: 1, Domain: "vm-rec-only", Hostname: "only", Media: jobpkg.MediaVFAT}},
	}
	buildSecrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(buildSecrets, "vanished"), []byte("Secret-That-Vanished\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	uri := "test://" + filepath.Join(t.TempDir(), "node.xml")
	h := startAgent(t, uri, func(payloadDir string) {
		var node strings.Builder
		node.WriteString("<node>\n")
		for _, d := range doms {
			rd, err := payloadtest.Render(d.job, buildSecrets, payload.Options{})
			if err != nil {
				t.Fatal(err)
			}
			img := filepath.Join(payloadDir, rd.ImageName(d.uuid))
			if d.res, err = rd.Write(context.Background(), img, payload.Options{GID: -1}); err != nil {
				t.Fatal(err)
			}
			rc, err := recipe.New(rd, d.res)
			if err != nil {
				t.Fatal(err)
			}
			// sealed with the agent's key (secrets next to the payload
			// directory, startAgentWith), made here as the agent makes it
			keys, err := seal.LoadOrCreate(recipe.KeyFile(filepath.Join(filepath.Dir(payloadDir), "secrets")))
			if err != nil {
				t.Fatal(err)
			}
			el, err := rc.Element(keys)
			if err != nil {
				t.Fatal(err)
			}
			disk := ""
			if d.drive {
				disk = fmt.Sprintf(`<disk type='file' device='cdrom'><driver name='qemu' type='raw'/><source file='%s' startupPolicy='optional'/><target dev='hdc' bus='ide'/><readonly/><alias name='ua-vmpayload'/></disk>`, img)
			}
			fmt.Fprintf(&node, "<domain type='test'><name>%s</name><uuid>%s</uuid><memory>65536</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os><metadata>%s</metadata><devices>%s</devices></domain>\n",
				d.name, d.uuid, el, disk)
			if d.removeImg {
				if err := os.Remove(img); err != nil {
					t.Fatal(err)
				}
			}
		}
		node.WriteString("</node>\n")
		if err := os.WriteFile(strings.TrimPrefix(uri, "test://"), []byte(node.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	for _, d := range doms {
		switch d.want {
		case "rebuilt", "kept":
			if sum := testenv.FileSHA256(t, d.res.Path); sum != d.res.SHA256 {
				t.Errorf("%s: image sha256 %s, want %s", d.name, sum, d.res.SHA256)
			}
		case "error":
			if _, err := os.Stat(d.res.Path); !os.IsNotExist(err) {
				t.Errorf("%s: image present although its secret vanished (%v)", d.name, err)
			}
		}
		if x := h.domainXML(d.name); strings.Contains(x, "Plain-Startup-Pw") {
			t.Errorf("%s: plaintext password in the definition", d.name)
		}
	}
	// The agent still runs and takes jobs. (Node-file domains run; the
	// test driver changes no devices, so the job defines a new domain.)
	h.drop("after-rebuild", map[string]any{"version": 1, "domain": "vm-rec-new", "domain_xml": domainXML("vm-rec-new", "pc", ""), "action": "attach", "hostname": "fresh"})
	r := h.result("after-rebuild")
	if r.State != result.StateDone {
		t.Fatalf("job after start-up rebuild: %+v", r.Error)
	}
	rc, ok, err := recipe.FromDomainXML(h.domainXML("vm-rec-new"))
	if err != nil || !ok || rc.SHA256 != r.Payload.SHA256 {
		t.Errorf("recipe after the new job: %+v %v %v", rc, ok, err)
	}
}
