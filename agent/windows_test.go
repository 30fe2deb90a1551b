package agent_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload/guestreport"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestAgentWindowsConfigDrive runs a Windows job (guest_os "windows",
// config-2 with an administrator password secret) through the agent on
// qemu:///system, whose guest_report default is on: the image carries the
// password in meta_data.json, read through its Joliet tree as Windows
// reads it; the domain's live and persistent XML (with the recipe, which
// names the secret), the result and the agent's log do not; and the domain
// gets no guest-report channel (the reporter is a cloud-init part).
func TestAgentWindowsConfigDrive(t *testing.T) {
	needLibvirtd(t)
	for _, tool := range []string{"isoinfo"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: %v", tool, err)
		}
	}
	a := newAgent(t, systemURI) // guest_report defaults to on
	const pw = "WinAgent-Pw-5d1e9c"
	if err := os.MkdirAll(a.SecretsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.SecretsDir, "win-admin"), []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.start()
	name := domainName(t, "win")
	defineDomain(t, a.Dir, name, "q35", "")
	r := a.run("win-"+testenv.RandHex(t, 3), map[string]any{
		"version": 1, "domain": name, "action": "attach", "guest_os": "windows", "format": "configdrive",
		"hostname": "win-agent", "admin_username": "Administrator", "admin_password_secret": "win-admin",
	})
	mustDone(t, r)
	if r.Device == nil || r.Device.Bus != "sata" || r.Payload == nil || r.Payload.Label != "config-2" {
		t.Fatalf("device %+v payload %+v", r.Device, r.Payload)
	}
	if r.Guest != nil {
		t.Errorf("a Windows job got a guest report section: %+v", r.Guest)
	}
	md, err := exec.Command("isoinfo", "-J", "-i", r.Payload.Path, "-x", "/openstack/latest/meta_data.json").Output()
	if err != nil {
		t.Fatalf("isoinfo -J: %v", err)
	}
	var meta struct {
		Hostname string            `json:"hostname"`
		Meta     map[string]string `json:"meta"`
	}
	if err := json.Unmarshal(md, &meta); err != nil {
		t.Fatalf("meta_data.json through Joliet: %v\n%s", err, md)
	}
	if meta.Hostname != "win-agent" || meta.Meta["admin_pass"] != pw || meta.Meta["admin_username"] != "Administrator" {
		t.Errorf("meta_data.json through Joliet: %s", md)
	}
	resJSON, _ := json.Marshal(r)
	live, persistent := virsh(t, "dumpxml", name), virsh(t, "dumpxml", "--inactive", name)
	for what, text := range map[string]string{"result": string(resJSON), "live XML": live, "persistent XML": persistent, "agent log": a.Log()} {
		if strings.Contains(text, pw) {
			t.Errorf("the administrator password is in the %s", what)
		}
	}
	// the recipe is sealed; opened with the agent's key it names the secret
	rc, ok, err := recipe.FromDomainXML(persistent)
	if err != nil || !ok {
		t.Fatalf("no recipe in the persistent XML (%v):\n%s", err, persistent)
	}
	keys, err := seal.Load(recipe.KeyFile(a.SecretsDir))
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Open(keys); err != nil || rc.Job.AdminPasswordSecret != "win-admin" {
		t.Errorf("the recipe in the persistent XML does not name the secret (%v): %+v", err, rc.Job)
	}
	for what, text := range map[string]string{"live XML": live, "persistent XML": persistent} {
		if strings.Contains(text, guestreport.Channel) {
			t.Errorf("the %s has the guest report channel", what)
		}
	}
}
