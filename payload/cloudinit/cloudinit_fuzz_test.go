package cloudinit

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

// FuzzDeepMerge merges two cloud-config documents: DeepMerge must not
// modify its inputs, must keep every key of both, must take over's value
// for keys where the two are not both maps or both lists, and the result
// must render as YAML.
func FuzzDeepMerge(f *testing.F) {
	f.Add("#cloud-config\na: 1\nl: [1]\nm: {x: 1}\n", "#cloud-config\na: 2\nl: [2]\nm: {y: 2}\n")
	f.Add("#cloud-config\nusers: [default]\n", "#cloud-config\nusers:\n  - name: x\n    groups: [a]\n")
	f.Add("#cloud-config\nk: [1]\n", "#cloud-config\nk: s\n")
	f.Add("#cloud-config\nx: &a {b: 1}\ny: *a\n", "#cloud-config\ny: {c: 2}\n")
	f.Add("", "#cloud-config\n{}\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		base, err := job.ParseYAMLMap(a)
		if err != nil {
			return
		}
		over, err := job.ParseYAMLMap(b)
		if err != nil {
			return
		}
		base2, _ := job.ParseYAMLMap(a)
		over2, _ := job.ParseYAMLMap(b)
		out := DeepMerge(base, over)
		if !reflect.DeepEqual(base, base2) || !reflect.DeepEqual(over, over2) {
			t.Fatal("DeepMerge modified an input")
		}
		for k := range base {
			if _, ok := out[k]; !ok {
				t.Fatalf("key %q of base lost", k)
			}
		}
		for k, ov := range over {
			got, ok := out[k]
			if !ok {
				t.Fatalf("key %q of over lost", k)
			}
			_, bm := base[k].(map[string]any)
			_, om := ov.(map[string]any)
			_, bl := base[k].([]any)
			_, ol := ov.([]any)
			if !(bm && om) && !(bl && ol) && !reflect.DeepEqual(got, ov) {
				t.Fatalf("key %q: got %v, want over's %v", k, got, ov)
			}
			if bl && ol && len(got.([]any)) != len(base[k].([]any))+len(ov.([]any)) {
				t.Fatalf("key %q: lists not appended", k)
			}
		}
		if _, err := marshalYAML(out); err != nil {
			t.Fatalf("merged document does not render: %v", err)
		}
	})
}

// FuzzSplitMultipart reads arbitrary MIME user-data: SplitMultipart must not
// panic, and what it splits must survive JoinMultipart and a second split
// with the same bodies.
func FuzzSplitMultipart(f *testing.F) {
	f.Add("Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/cloud-config\n\n#cloud-config\na: 1\n--b\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho hi\n--b--\n")
	f.Add("Content-Type: multipart/mixed; boundary=\"\"\n\n--\n")
	f.Add("Content-Type: multipart/mixed; boundary=Q\n\nno parts")
	f.Add("MIME-Version: 1.0\n\n")
	f.Fuzz(func(t *testing.T, doc string) {
		parts, err := SplitMultipart(doc)
		if err != nil {
			return
		}
		if len(parts) == 0 {
			t.Fatal("no parts and no error")
		}
		const boundary = "vmpayload-fuzz-boundary-7c1d"
		for _, p := range parts {
			if bytes.Contains(p.Body, []byte(boundary)) {
				return
			}
			for k, vs := range p.Header {
				for _, v := range vs {
					if strings.ContainsAny(k+v, "\r\n") {
						return // not representable as a header line
					}
				}
			}
		}
		joined, err := JoinMultipart(parts, boundary)
		if err != nil {
			t.Fatalf("JoinMultipart of split parts: %v", err)
		}
		again, err := SplitMultipart(string(joined))
		if err != nil {
			t.Fatalf("re-split: %v\n%q", err, joined)
		}
		if len(again) != len(parts) {
			t.Fatalf("re-split gave %d parts, want %d", len(again), len(parts))
		}
		for i := range parts {
			if !bytes.Equal(bytes.TrimRight(again[i].Body, "\r\n"), bytes.TrimRight(parts[i].Body, "\r\n")) {
				t.Fatalf("part %d body changed: %q -> %q", i, parts[i].Body, again[i].Body)
			}
		}
	})
}

// FuzzRender renders jobs that validation accepts: Render must succeed or
// report a *job.ValidationError (anything else would reach the agent as a
// run-time failure of a job it accepted), and must be deterministic.
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
		j, rep := job.Parse(doc)
		if !rep.OK() {
			return
		}
		jj := j.WithDefaults()
		salt := func() (string, error) { return "fuzzsaltfuzzsalt", nil }
		d1, err := Render(Input{Job: jj, UserData: jj.UserData}, Options{Salt: salt})
		if err != nil {
			var ve *job.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("a valid job fails to render with a non-validation error: %v", err)
			}
			return
		}
		d2, err := Render(Input{Job: jj, UserData: jj.UserData}, Options{Salt: salt})
		if err != nil || d1.ContentHash != d2.ContentHash || !reflect.DeepEqual(d1.Files, d2.Files) {
			t.Fatalf("render is not deterministic: %v", err)
		}
		if len(d1.Files) == 0 || d1.InstanceID == "" {
			t.Fatalf("rendered nothing: %+v", d1)
		}
	})
}
