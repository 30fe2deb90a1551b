package cloudinit_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
)

// FuzzRender renders jobs that payload.Check passes: the render must
// succeed or refuse only the size of the documents (anything else would
// reach the agent as a run-time failure of a job it accepted), and must be
// deterministic.
func FuzzRender(f *testing.F) {
	f.Add("#cloud-config\npackages: [htop]\n", "", "vm-1", false, false)
	f.Add("#!/bin/sh\necho hi\n", "version: 1\nconfig: []\n", "vm-2", true, true)
	f.Add("Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/cloud-config\n\n#cloud-config\na: 1\n--b--\n", "", "vm-3", false, true)
	f.Add("#cloud-config\nusers: [default, {name: x}]\nruncmd: [[echo, a]]\n", "version: 2\nethernets: {eth0: {dhcp4: true}}\n", "h", true, false)
	f.Add("#include\nhttp://example.invalid/x\n", "", "", false, false)
	f.Fuzz(func(t *testing.T, userData, netConfig, hostname string, configDrive, replace bool) {
		m := map[string]any{"version": 1}
		if userData != "" {
			m["user_data"] = userData
		}
		if netConfig != "" {
			m["network_config"] = netConfig
		}
		if hostname != "" {
			m["hostname"] = hostname
		}
		if configDrive {
			m["format"] = "configdrive"
		}
		if replace {
			m["user_data_mode"] = "replace"
		}
		doc, err := json.Marshal(m)
		if err != nil {
			return
		}
		_, c, rep := payload.Check(doc, payload.CheckOptions{Secrets: true})
		if !rep.OK() {
			return
		}
		salt := func() (string, error) { return "fuzzsaltfuzzsalt", nil }
		r1, err := payload.Render(c, payload.Options{Salt: salt})
		if err != nil {
			if e := payloadtest.RenderRefusal(err); e != nil {
				t.Fatal(e)
			}
			return
		}
		r2, err := payload.Render(c, payload.Options{Salt: salt})
		if err != nil {
			t.Fatalf("a second render failed: %v", err)
		}
		d1, d2 := r1.Docs, r2.Docs
		if d1.ContentHash != d2.ContentHash || !reflect.DeepEqual(d1.Files, d2.Files) {
			t.Fatalf("render is not deterministic: %v", err)
		}
		if len(d1.Files) == 0 || d1.InstanceID == "" {
			t.Fatalf("rendered nothing: %+v", d1)
		}
	})
}
