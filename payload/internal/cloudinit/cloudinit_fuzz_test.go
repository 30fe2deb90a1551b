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
	for _, a := range renderSeeds {
		f.Add(a.userData, a.netConfig, a.hostname, a.configDrive, a.replace)
	}
	f.Fuzz(func(t *testing.T, userData, netConfig, hostname string, configDrive, replace bool) {
		doc := renderArgs{userData, netConfig, hostname, configDrive, replace}.job()
		_, c, rep := payload.Check(doc, payload.CheckOptions{Secrets: true})
		if !rep.OK() {
			return
		}
		r1 := payloadtest.FuzzRender(t, c)
		if r1 == nil {
			return
		}
		r2, err := payload.Render(c, payload.Options{Salt: payloadtest.FuzzSalt})
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

// renderArgs are FuzzRender's arguments; TestRecordedJobs replays its
// seeds and its corpus as jobs.
type renderArgs struct {
	userData, netConfig, hostname string
	configDrive, replace          bool
}

// renderSeeds are FuzzRender's seeds.
var renderSeeds = []renderArgs{
	{"#cloud-config\npackages: [htop]\n", "", "vm-1", false, false},
	{"#!/bin/sh\necho hi\n", "version: 1\nconfig: []\n", "vm-2", true, true},
	{"Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/cloud-config\n\n#cloud-config\na: 1\n--b--\n", "", "vm-3", false, true},
	{"#cloud-config\nusers: [default, {name: x}]\nruncmd: [[echo, a]]\n", "version: 2\nethernets: {eth0: {dhcp4: true}}\n", "h", true, false},
	{"#include\nhttp://example.invalid/x\n", "", "", false, false},
}

// job is the job document FuzzRender checks and renders for a.
func (a renderArgs) job() []byte {
	m := map[string]any{"version": 1}
	if a.userData != "" {
		m["user_data"] = a.userData
	}
	if a.netConfig != "" {
		m["network_config"] = a.netConfig
	}
	if a.hostname != "" {
		m["hostname"] = a.hostname
	}
	if a.configDrive {
		m["format"] = "configdrive"
	}
	if a.replace {
		m["user_data_mode"] = "replace"
	}
	b, err := json.Marshal(m) // strings and a number: it does not fail
	if err != nil {
		panic(err)
	}
	return b
}
