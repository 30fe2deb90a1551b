package recipe

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

const (
	examplesDir = "../../configs/examples"
	secretsDir  = "../../configs/examples/secrets"
)

type testJob struct {
	name string
	j    *job.Job
}

// testJobs are every buildable example job plus jobs exercising each way a
// password or user-data may arrive.
func testJobs(t testing.TB) []testJob {
	t.Helper()
	var out []testJob
	for _, e := range payloadtest.BuildableExamples(t, examplesDir) {
		out = append(out, testJob{e.Name, e.Job})
	}
	out = append(out,
		testJob{"plaintext-password", &job.Job{Version: 1, ID: "j1", Domain: "vm1", Hostname: "vm1",
			Users:    []job.User{{Name: "alice", Password: "hunter2-plaintext"}, {Name: "bob", Password: "hunter2-plaintext"}},
			UserData: "#!/bin/sh\necho multipart\n"}},
		testJob{"plaintext-password-configdrive-vfat", &job.Job{Version: 1, Domain: "vm2", Format: job.FormatConfigDrive, Media: job.MediaVFAT,
			Users: []job.User{{Name: "alice", Password: "hunter2-plaintext"}}}},
		testJob{"password-secret", &job.Job{Version: 1, Domain: "vm3", Hostname: "vm3",
			Users: []job.User{{Name: "svc", PasswordSecret: "svc-password"}}}},
		testJob{"user-data-secret", &job.Job{Version: 1, Domain: "vm4", Media: job.MediaVFAT,
			UserDataSecret: "extra-user-data", Runcmd: []job.Command{{Shell: "true"}}}},
		testJob{"root-seeds-generated", &job.Job{Version: 1, Domain: "vm6", Hostname: "vm6",
			Users:       []job.User{{Name: "root", Password: "hunter2-plaintext", SSHAuthorizedKeys: []string{rootKey}}},
			SSHHostKeys: []job.SSHHostKey{{Type: "ecdsa", PrivateKeySecret: "host-ecdsa"}, {Type: "rsa", PrivateKeySecret: "host-rsa"}},
			Locale:      "en_GB.UTF-8", RandomSeed: &job.RandomSeed{GenerateBytes: 64},
			PowerState: &job.PowerState{Mode: "poweroff"}, PhoneHome: &job.PhoneHome{URL: "http://192.0.2.1/"}}},
		testJob{"seeds-configdrive-vfat-generated", &job.Job{Version: 1, Domain: "vm7", Format: job.FormatConfigDrive, Media: job.MediaVFAT,
			SSHHostKeys: []job.SSHHostKey{{Type: "ed25519", PrivateKeySecret: "host-ed25519"}}, RandomSeed: &job.RandomSeed{GenerateBytes: 32},
			NetworkData: map[string]any{"links": []any{map[string]any{"id": "l0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:07"}},
				"networks": []any{map[string]any{"id": "n0", "type": "ipv4_dhcp", "link": "l0"}}}}},
		testJob{"user-data-base64", &job.Job{Version: 1, Domain: "vm5", UserDataBase64: "IyEvYmluL3NoCmVjaG8gaGkK", UserDataMode: job.ModeReplace}},
		// the last file of the image is 2048 bytes: the Joliet root go-diskfs
		// zeroed (issue 14); recorded now, it rebuilds in the fixed layout
		// Ignition configs (issue 34): delivered as images, and as the
		// config file itself (fw_cfg; TestIgnitionFwCfgRecipe)
		testJob{"ignition-configdrive", &job.Job{Version: 1, Domain: "vm10", Format: job.FormatIgnition, IgnitionDelivery: job.DeliveryConfigDrive,
			Hostname: "vm10", Timezone: "UTC", Users: []job.User{{Name: "core", Password: "hunter2-plaintext", SSHAuthorizedKeys: []string{rootKey}}},
			SSHHostKeys: []job.SSHHostKey{{Type: "ed25519", PrivateKeySecret: "host-ed25519"}},
			Ignition:    map[string]any{"ignition": map[string]any{"version": "3.4.0"}, "systemd": map[string]any{"units": []any{map[string]any{"name": "a.service", "mask": true}}}}}},
		testJob{"ignition-nocloud-vfat", &job.Job{Version: 1, Domain: "vm11", Format: job.FormatIgnition, IgnitionDelivery: job.DeliveryNoCloud, Media: job.MediaVFAT,
			Users: []job.User{{Name: "svc", PasswordSecret: "svc-password"}}, IgnitionBase64: "eyJpZ25pdGlvbiI6eyJ2ZXJzaW9uIjoiMy42LjAifX0="}},
		testJob{"ignition-fwcfg", &job.Job{Version: 1, Domain: "vm12", Format: job.FormatIgnition, Hostname: "vm12",
			Users:       []job.User{{Name: "core", Password: "hunter2-plaintext"}, {Name: "svc", PasswordSecret: "svc-password"}},
			SSHHostKeys: []job.SSHHostKey{{Type: "ed25519", PrivateKeySecret: "host-ed25519"}},
			Ignition:    map[string]any{"ignition": map[string]any{"version": "3.6.0"}, "systemd": map[string]any{"units": []any{map[string]any{"name": "b.service", "mask": true}}}}}},
		testJob{"vendor-data-2048", &job.Job{Version: 1, Domain: "vm9", Hostname: "vm9",
			VendorData: "#!/bin/sh\n" + strings.Repeat("x", 2048-11) + "\n"}},
	)
	return out
}

const rootKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ9UCj6yFbzrJRqgbKp1+pjOWpNQWIeq40ujmhEHvz3p root@example"

// TestSeedsRecipe: a generated random seed is recorded as the data that
// went into the image (and the image's instance-id stays that of the job
// with generate_bytes); host private keys stay secret references; a recipe
// that still asks to generate is refused; a changed host key secret is
// reported by name and nothing is written.
func TestSeedsRecipe(t *testing.T) {
	secrets := t.TempDir()
	for _, n := range []string{"host-ed25519", "host-rsa"} {
		b, err := os.ReadFile(filepath.Join(secretsDir, n))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(secrets, n), b, 0o600))
	}
	j := &job.Job{Version: 1, Domain: "vm", Hostname: "vm", Format: job.FormatConfigDrive,
		SSHHostKeys: []job.SSHHostKey{{Type: "ed25519", PrivateKeySecret: "host-ed25519"}},
		RandomSeed:  &job.RandomSeed{GenerateBytes: 48}}
	dir := t.TempDir()
	r, res := build(t, j, dir, secrets)
	rc, err := New(r, res)
	must(t, err)
	if rc.Job.RandomSeed == nil || rc.Job.RandomSeed.GenerateBytes != 0 || rc.Job.RandomSeed.Data != r.Docs.RandomSeed || r.Docs.RandomSeed == "" {
		t.Fatalf("recipe random_seed %+v, image had %q", rc.Job.RandomSeed, r.Docs.RandomSeed)
	}
	if j.RandomSeed.GenerateBytes != 48 || j.RandomSeed.Data != "" {
		t.Errorf("New changed the caller's job: %+v", j.RandomSeed)
	}
	el, err := rc.Element(testKeys)
	must(t, err)
	priv, err := os.ReadFile(filepath.Join(secrets, "host-ed25519"))
	must(t, err)
	if strings.Contains(el, "PRIVATE KEY") || strings.Contains(el, strings.Split(string(priv), "\n")[1]) {
		t.Fatalf("recipe holds the private key: %s", el)
	}
	// sealed: neither the secret's name nor the seed in clear; opened,
	// both are there
	if strings.Contains(el, "host-ed25519") || strings.Contains(el, r.Docs.RandomSeed) {
		t.Errorf("recipe holds the seed or the job in clear: %s", el)
	}
	back, ok, err := FromDomainXML(domainXML(el))
	if err != nil || !ok || back.Open(testKeys) != nil {
		t.Fatalf("reading the sealed recipe back: %v %v", ok, err)
	}
	if back.Job.SSHHostKeys[0].PrivateKeySecret != "host-ed25519" || back.Job.RandomSeed.Data != r.Docs.RandomSeed {
		t.Errorf("opened recipe lacks the secret reference or the seed: %+v", back.Job)
	}
	// the same job built again generates another seed but keeps the
	// content hash and instance-id (no first-boot churn)
	r2, err := payloadtest.Render(j, secrets, payload.Options{})
	must(t, err)
	if r2.Docs.RandomSeed == r.Docs.RandomSeed || r2.Docs.InstanceID != r.Docs.InstanceID || r2.Docs.ContentHash != r.Docs.ContentHash {
		t.Errorf("second build: seed reused %v, instance-id %q vs %q", r2.Docs.RandomSeed == r.Docs.RandomSeed, r2.Docs.InstanceID, r.Docs.InstanceID)
	}

	// a second render of the job (new seed) cannot be recorded for the
	// image the first one wrote (as when the agent reuses an image)
	if _, err := New(r2, res); err == nil || !strings.Contains(err.Error(), "random seed") {
		t.Errorf("New for a reused image with another generated seed: %v", err)
	}

	bad := *rc
	bad.Job.RandomSeed = &job.RandomSeed{GenerateBytes: 48}
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "random_seed.generate_bytes") {
		t.Errorf("Check of a recipe that generates: %v", err)
	}

	// a key of another type in the secret: refused by field, nothing written
	b, err := os.ReadFile(filepath.Join(secretsDir, "host-ecdsa"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(secrets, "host-ed25519"), b, 0o600))
	must(t, os.Remove(rc.Path))
	_, err = Rebuild(context.Background(), rc, RebuildOptions{Keys: testKeys, PayloadDir: dir, SecretsDir: secrets, GID: -1})
	if err == nil || !strings.Contains(err.Error(), "ssh_host_keys[0].private_key_secret") || strings.Contains(err.Error(), "PRIVATE") {
		t.Errorf("Rebuild with another key in the secret: %v", err)
	}
	wantNoImage(t, rc.Path)
	// an ed25519 key of another value: the image bytes differ
	other := filepath.Join(t.TempDir(), "k")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	b, err = os.ReadFile(other)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(secrets, "host-ed25519"), b, 0o600))
	_, err = Rebuild(context.Background(), rc, RebuildOptions{Keys: testKeys, PayloadDir: dir, SecretsDir: secrets, GID: -1})
	if !errors.Is(err, ErrContentChanged) || !strings.Contains(err.Error(), "host-ed25519") {
		t.Errorf("Rebuild with another ed25519 key: %v", err)
	}
}

// build renders and writes j into dir, the way the agent does.
func build(t testing.TB, j *job.Job, dir, secrets string) (*payload.Rendered, payload.Result) {
	t.Helper()
	r, err := payloadtest.Render(j, secrets, payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Write(context.Background(), filepath.Join(dir, r.ImageName("dom")), payload.Options{GID: -1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return r, res
}

// domainXML wraps a recipe element the way libvirt holds it.
func domainXML(el string) string {
	return `<domain type='kvm'><name>vm</name><metadata><other:thing xmlns:other="urn:x">keep</other:thing>` + el +
		`</metadata><devices><disk type='file' device='cdrom'/></devices></domain>`
}

func TestRoundTripRebuildsIdenticalImages(t *testing.T) {
	for _, tj := range testJobs(t) {
		t.Run(tj.name, func(t *testing.T) {
			dir := t.TempDir()
			r, res := build(t, tj.j, dir, secretsDir)
			orig, err := os.ReadFile(res.Path)
			if err != nil {
				t.Fatal(err)
			}
			rc, el := newElement(t, r, res)
			for _, u := range tj.j.Users {
				if u.Password != "" && strings.Contains(el, u.Password) {
					t.Fatalf("recipe XML holds the plaintext password: %s", el)
				}
			}
			if strings.Contains(el, "PRIVATE KEY") {
				t.Fatalf("recipe XML holds a private key: %s", el)
			}
			if strings.Contains(el, "hunter2") {
				t.Fatalf("recipe XML holds a plaintext password: %s", el)
			}
			if tj.j.UserDataSecret != "" {
				secret, err := os.ReadFile(filepath.Join(secretsDir, tj.j.UserDataSecret))
				if err != nil {
					t.Fatal(err)
				}
				if rc.Job.UserDataSecret != tj.j.UserDataSecret || rc.Job.UserData != "" || strings.Contains(el, strings.TrimSpace(string(secret))[:20]) {
					t.Errorf("user_data_secret is not kept as a reference: %s", el)
				}
			}
			back := roundTrip(t, el)
			if err := os.Remove(res.Path); err != nil {
				t.Fatal(err)
			}
			out, err := Rebuild(context.Background(), back, RebuildOptions{Keys: testKeys, PayloadDir: dir, SecretsDir: secretsDir, Mode: 0o640, GID: -1})
			if err != nil || out != OutcomeRebuilt {
				t.Fatalf("Rebuild: %q %v", out, err)
			}
			got, err := os.ReadFile(res.Path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, orig) {
				t.Fatalf("rebuilt image differs from the original")
			}
			if back.InstanceID != res.InstanceID {
				t.Errorf("instance-id %q, original %q", back.InstanceID, res.InstanceID)
			}
			if out, err := Rebuild(context.Background(), back, RebuildOptions{Keys: testKeys, PayloadDir: dir, SecretsDir: secretsDir, GID: -1}); err != nil || out != OutcomeIntact {
				t.Errorf("second Rebuild: %q %v", out, err)
			}
		})
	}
}

// TestIgnitionFwCfgRecipe: the recipe of an Ignition config delivered by
// fw_cfg names the config file itself (format ignition, no label, the
// job's default media); Rebuild writes it again byte-identical with the
// payload directory's mode and refuses, writing nothing, when a secret it
// was built from changed.
func TestIgnitionFwCfgRecipe(t *testing.T) {
	secrets := t.TempDir()
	b, err := os.ReadFile(filepath.Join(secretsDir, "svc-password"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(secrets, "svc-password"), b, 0o600))
	j := &job.Job{Version: 1, Domain: "vm12", Format: job.FormatIgnition, Hostname: "vm12",
		Users: []job.User{{Name: "svc", PasswordSecret: "svc-password"}}}
	dir := t.TempDir()
	r, res := build(t, j, dir, secrets)
	if !strings.HasSuffix(res.Path, ".ign") {
		t.Fatalf("config written at %s, want a .ign file", res.Path)
	}
	orig, err := os.ReadFile(res.Path)
	must(t, err)
	rc, err := New(r, res)
	must(t, err)
	el, err := rc.Element(testKeys)
	must(t, err)
	for _, want := range []string{`format="ignition"`, `media="iso"`, `label=""`, `path="` + res.Path + `"`, `sha256="` + res.SHA256 + `"`} {
		if !strings.Contains(el, want) {
			t.Errorf("recipe element lacks %s: %s", want, el)
		}
	}
	back, ok, err := FromDomainXML(domainXML(el))
	if err != nil || !ok {
		t.Fatalf("FromDomainXML: %v %v", ok, err)
	}
	must(t, os.Remove(res.Path))
	opt := RebuildOptions{Keys: testKeys, PayloadDir: dir, SecretsDir: secrets, Mode: 0o640, GID: -1}
	if out, err := Rebuild(context.Background(), back, opt); err != nil || out != OutcomeRebuilt {
		t.Fatalf("Rebuild: %q %v", out, err)
	}
	got, err := os.ReadFile(res.Path)
	must(t, err)
	if !bytes.Equal(got, orig) {
		t.Fatalf("rebuilt config differs from the original:\n%s\n%s", got, orig)
	}
	if fi, err := os.Stat(res.Path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("rebuilt config mode %v (%v), want 0640", fi.Mode(), err)
	}
	if out, err := Rebuild(context.Background(), back, opt); err != nil || out != OutcomeIntact {
		t.Errorf("second Rebuild: %q %v", out, err)
	}
	// the password secret changed: nothing is written
	must(t, os.Remove(res.Path))
	must(t, os.WriteFile(filepath.Join(secrets, "svc-password"), []byte("another password\n"), 0o600))
	if _, err := Rebuild(context.Background(), back, opt); !errors.Is(err, ErrContentChanged) || !strings.Contains(err.Error(), "svc-password") {
		t.Errorf("Rebuild with a changed secret: %v", err)
	}
	if _, err := os.Stat(res.Path); !os.IsNotExist(err) {
		t.Errorf("a config was written although its content changed: %v", err)
	}
}

func TestNewRefusesPrebuilt(t *testing.T) {
	r := &payload.Rendered{Job: job.Job{Version: 1, PrebuiltImage: "/x.iso"}, Docs: nil}
	if _, err := New(r, payload.Result{}); err == nil {
		t.Fatal("no error without documents")
	}
	j := &job.Job{Version: 1, Hostname: "h"}
	rr, res := build(t, j, t.TempDir(), "")
	rr.Job.PrebuiltImage = "/x.iso"
	if _, err := New(rr, res); !errors.Is(err, ErrPrebuilt) {
		t.Fatalf("got %v, want ErrPrebuilt", err)
	}
}

// TestFromDomainXMLForms checks the forms libvirt may hand back: another
// prefix, a default namespace, CDATA, re-indented text, and no recipe.
func TestFromDomainXMLForms(t *testing.T) {
	dir := t.TempDir()
	r, res := build(t, &job.Job{Version: 1, Hostname: "h", Users: []job.User{{Name: "u", Password: "pw-secret-1"}}}, dir, "")
	rc, _ := newElement(t, r, res)
	el, err := rc.render(nil, true) // the form before sealing
	must(t, err)
	js, _ := rc.jobJSON()
	img := el[strings.Index(el, "<vmpayload:image"):strings.Index(el, "<vmpayload:job>")]
	for _, c := range []struct {
		name, xml string
		found     bool
	}{
		{"as written", domainXML(el), true},
		{"other prefix", domainXML(strings.ReplaceAll(strings.ReplaceAll(el, "vmpayload:", "vp:"), "xmlns:vmpayload=", "xmlns:vp=")), true},
		{"libvirt style", "<domain type=\"kvm\">\n  <name>vm</name>\n  <metadata>\n    <vp:recipe xmlns:vp=\"" + Namespace + "\" version=\"1\">\n      " +
			strings.ReplaceAll(img, "vmpayload:", "vp:") + "\n      <vp:job>" + xmlEscape(string(js)) + "</vp:job>\n    </vp:recipe>\n  </metadata>\n</domain>\n", true},
		{"default namespace and CDATA", "<domain><metadata><recipe xmlns=\"" + Namespace + "\" version=\"1\">" +
			strings.ReplaceAll(img, "vmpayload:", "") + "<job><![CDATA[" + string(js) + "]]></job></recipe></metadata></domain>", true},
		{"no metadata", "<domain><name>vm</name></domain>", false},
		{"other metadata only", "<domain><metadata><a:b xmlns:a=\"urn:a\"/></metadata></domain>", false},
		{"recipe outside metadata", "<domain><description>x</description>" + el + "</domain>", false},
	} {
		got, ok, err := FromDomainXML(c.xml)
		if err != nil || ok != c.found {
			t.Errorf("%s: found %v, err %v\n%s", c.name, ok, err, c.xml)
			continue
		}
		if ok && (got.SHA256 != rc.SHA256 || got.Job.Users[0].PasswordHash != rc.Job.Users[0].PasswordHash || got.InstanceID != rc.InstanceID) {
			t.Errorf("%s: parsed %+v", c.name, got)
		}
	}
	if strings.Contains(el, "pw-secret-1") {
		t.Errorf("element holds the plaintext password")
	}
}

func xmlEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestFromDomainXMLRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	r, res := build(t, &job.Job{Version: 1, Hostname: "h"}, dir, "")
	rc, err := New(r, res)
	if err != nil {
		t.Fatal(err)
	}
	el, _ := rc.render(nil, true) // the form before sealing
	js, _ := rc.jobJSON()
	jobEl := el[strings.Index(el, "<vmpayload:job>"):strings.Index(el, "</vmpayload:recipe>")]
	swap := func(old, new string) string { return domainXML(strings.Replace(el, old, new, 1)) }
	for _, c := range []struct {
		name, xml, field string
	}{
		{"not xml", "<domain><metadata>", "domain XML"},
		{"not a domain", "<network/>", "<domain>"},
		{"missing version", swap(` version="1"`, ""), "recipe@version"},
		{"future version", swap(` version="1"`, ` version="2"`), "recipe@version"},
		{"unknown recipe attribute", swap(` version="1"`, ` version="1" extra="x"`), "recipe@extra"},
		{"unknown element", swap(jobEl, jobEl+"<vmpayload:extra/>"), "extra"},
		{"foreign element", swap(jobEl, jobEl+"<x:y xmlns:x=\"urn:x\"/>"), "y"},
		{"stray text", swap(jobEl, jobEl+"text"), "recipe"},
		{"missing job", swap(jobEl, ""), "job"},
		{"two jobs", swap(jobEl, jobEl+jobEl), "job"},
		{"missing image", domainXML(strings.Replace(el, el[strings.Index(el, "<vmpayload:image"):strings.Index(el, "<vmpayload:job>")], "", 1)), "image"},
		{"missing sha256", swap(` sha256="`+rc.SHA256+`"`, ""), "image@sha256"},
		{"bad sha256", swap(rc.SHA256, "zz"+rc.SHA256[2:]), "image@sha256"},
		{"bad size", swap(` size="`, ` size="x`), "image@size"},
		{"bad format", swap(` format="nocloud"`, ` format="floppy"`), "image@format"},
		{"bad media", swap(` media="iso"`, ` media="tape"`), "image@media"},
		{"label mismatch", swap(` label="cidata"`, ` label="config-2"`), "image@label"},
		{"unknown image attribute", swap(` label="cidata"`, ` label="cidata" colour="red"`), "image@colour"},
		{"relative path", swap(` path="`+rc.Path+`"`, ` path="x.iso"`), "image@path"},
		{"dotdot path", swap(` path="`+rc.Path+`"`, ` path="/var/run/payload/../x.iso"`), "image@path"},
		{"empty instance-id", swap(` instance-id="`+rc.InstanceID+`"`, ` instance-id=""`), "image@instance-id"},
		{"bad content hash", swap(` content-hash="`+rc.ContentHash+`"`, ` content-hash="abc"`), "image@content-hash"},
		{"job not json", swap(jobEl, "<vmpayload:job>{nope</vmpayload:job>"), "job"},
		{"job unknown field", swap(jobEl, "<vmpayload:job>"+xmlEscape(strings.Replace(string(js), `{`, `{"colour":"red",`, 1))+"</vmpayload:job>"), "job.colour"},
		{"job format mismatch", swap(jobEl, "<vmpayload:job>"+xmlEscape(strings.Replace(string(js), `"format":"nocloud"`, `"format":"configdrive"`, 1))+"</vmpayload:job>"), "job.format"},
		{"job with plaintext password", swap(jobEl, "<vmpayload:job>"+xmlEscape(strings.Replace(string(js), `{`, `{"users":[{"name":"u","password":"pw"}],`, 1))+"</vmpayload:job>"), "job.users[0].password"},
		{"job with id", swap(jobEl, "<vmpayload:job>"+xmlEscape(strings.Replace(string(js), `{`, `{"id":"x",`, 1))+"</vmpayload:job>"), "job.id"},
		{"job with action", swap(jobEl, "<vmpayload:job>"+xmlEscape(strings.Replace(string(js), `{`, `{"action":"start",`, 1))+"</vmpayload:job>"), "job.action"},
		{"job prebuilt", swap(jobEl, "<vmpayload:job>"+xmlEscape(`{"version":1,"prebuilt_image":"/x.iso"}`)+"</vmpayload:job>"), "job"},
		{"element inside job", swap(jobEl, "<vmpayload:job><b/></vmpayload:job>"), "job"},
		{"two recipes", domainXML(el + el), "more than one recipe"},
	} {
		_, ok, err := FromDomainXML(c.xml)
		if err == nil || ok {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: error %q does not name %q", c.name, err, c.field)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", c.name, err)
		}
	}
}

func TestRebuildBranches(t *testing.T) {
	secretJob := &job.Job{Version: 1, Domain: "vm", Hostname: "vm",
		Users: []job.User{{Name: "svc", PasswordSecret: "pw"}}, UserDataSecret: "ud"}
	type env struct {
		payloadDir, secrets string
		rc                  *Recipe
		orig                []byte
	}
	setup := func(t *testing.T) *env {
		e := &env{payloadDir: filepath.Join(t.TempDir(), "payload"), secrets: t.TempDir()}
		if err := os.Mkdir(e.payloadDir, 0o711); err != nil {
			t.Fatal(err)
		}
		testenv.WriteFiles(t, e.secrets, map[string]string{"pw": "s3cret\n", "ud": "#cloud-config\npackages: [jq]\n"})
		r, res := build(t, secretJob, e.payloadDir, e.secrets)
		rc, err := New(r, res)
		if err != nil {
			t.Fatal(err)
		}
		e.rc = rc
		if e.orig, err = os.ReadFile(res.Path); err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, c := range []struct {
		name    string
		prepare func(t *testing.T, e *env)
		want    Outcome
		errIs   error
		errHas  string
		kept    bool // the file at the path must be unchanged afterwards
	}{
		{name: "intact", want: OutcomeIntact, kept: true},
		{name: "missing image", prepare: func(t *testing.T, e *env) { must(t, os.Remove(e.rc.Path)) }, want: OutcomeRebuilt},
		{name: "missing payload dir", prepare: func(t *testing.T, e *env) { must(t, os.RemoveAll(e.payloadDir)) }, want: OutcomeRebuilt},
		{name: "wrong sha on disk", prepare: func(t *testing.T, e *env) {
			b := bytes.Clone(e.orig)
			b[len(b)/2] ^= 0xff
			must(t, os.WriteFile(e.rc.Path, b, 0o640))
		}, want: OutcomeRebuilt},
		{name: "truncated on disk", prepare: func(t *testing.T, e *env) { must(t, os.Truncate(e.rc.Path, 100)) }, want: OutcomeRebuilt},
		{name: "symlink", prepare: func(t *testing.T, e *env) {
			must(t, os.Remove(e.rc.Path))
			must(t, os.Symlink("/etc/passwd", e.rc.Path))
		}, errIs: ErrRefused, errHas: "symbolic link"},
		{name: "directory at path", prepare: func(t *testing.T, e *env) {
			must(t, os.Remove(e.rc.Path))
			must(t, os.Mkdir(e.rc.Path, 0o700))
		}, errIs: ErrRefused, errHas: "directory"},
		{name: "path outside", prepare: func(t *testing.T, e *env) { e.rc.Path = "/etc/" + filepath.Base(e.rc.Path) }, errIs: ErrRefused, errHas: "not directly inside"},
		{name: "path in a subdirectory", prepare: func(t *testing.T, e *env) {
			e.rc.Path = filepath.Join(e.payloadDir, "sub", filepath.Base(e.rc.Path))
		}, errIs: ErrRefused, errHas: "not directly inside"},
		{name: "dotdot", prepare: func(t *testing.T, e *env) {
			e.rc.Path = e.payloadDir + "/../payload/" + filepath.Base(e.rc.Path)
		}, errIs: ErrRefused, errHas: `".."`},
		{name: "unclean path", prepare: func(t *testing.T, e *env) {
			e.rc.Path = e.payloadDir + "//" + filepath.Base(e.rc.Path)
		}, errIs: ErrRefused, errHas: "not directly inside"},
		{name: "hidden name", prepare: func(t *testing.T, e *env) { e.rc.Path = filepath.Join(e.payloadDir, ".x.iso") }, errIs: ErrRefused, errHas: "hidden"},
		{name: "secret vanished", prepare: func(t *testing.T, e *env) {
			must(t, os.Remove(e.rc.Path))
			must(t, os.Remove(filepath.Join(e.secrets, "pw")))
		}, errHas: `secret "pw" does not exist`},
		{name: "password secret changed", prepare: func(t *testing.T, e *env) {
			must(t, os.Remove(e.rc.Path))
			must(t, os.WriteFile(filepath.Join(e.secrets, "pw"), []byte("other"), 0o600))
		}, errIs: ErrContentChanged, errHas: `secrets "pw" (users[0].password_secret), "ud" (user_data_secret) changed`},
		{name: "user-data secret changed, old image kept", prepare: func(t *testing.T, e *env) {
			b := bytes.Clone(e.orig)
			b[len(b)-1] ^= 1
			must(t, os.WriteFile(e.rc.Path, b, 0o640))
			e.orig = b
			must(t, os.WriteFile(filepath.Join(e.secrets, "ud"), []byte("#cloud-config\npackages: [curl]\n"), 0o600))
		}, errIs: ErrContentChanged, errHas: "nothing was written", kept: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			if c.prepare != nil {
				c.prepare(t, e)
			}
			out, err := Rebuild(context.Background(), e.rc, RebuildOptions{Keys: testKeys, PayloadDir: e.payloadDir, SecretsDir: e.secrets, Mode: 0o640, GID: -1})
			if c.errIs != nil || c.errHas != "" {
				if err == nil {
					t.Fatalf("outcome %q, want an error", out)
				}
				if c.errIs != nil && !errors.Is(err, c.errIs) {
					t.Errorf("error %v, want %v", err, c.errIs)
				}
				if !strings.Contains(err.Error(), c.errHas) || !strings.Contains(err.Error(), filepath.Base(e.rc.Path)) || strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q: want one line naming the path and %q", err, c.errHas)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error reveals the secret")
				}
				if fi, lerr := os.Lstat(e.rc.Path); c.name == "secret vanished" || c.name == "password secret changed" {
					if lerr == nil {
						t.Errorf("something was left at the path: %v", fi.Mode())
					}
				}
			} else {
				if err != nil || out != c.want {
					t.Fatalf("got %q %v, want %q", out, err, c.want)
				}
				got, err := os.ReadFile(e.rc.Path)
				if err != nil || !bytes.Equal(got, e.orig) {
					t.Fatalf("image at the path is not the original (%v)", err)
				}
				fi, _ := os.Stat(e.rc.Path)
				if out == OutcomeRebuilt && fi.Mode().Perm() != 0o640 {
					t.Errorf("mode %v", fi.Mode())
				}
			}
			if c.kept {
				got, err := os.ReadFile(e.rc.Path)
				if err != nil || !bytes.Equal(got, e.orig) {
					t.Errorf("the file at the path was changed (%v)", err)
				}
			}
			left, _ := filepath.Glob(filepath.Join(e.payloadDir, ".*"))
			if len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// wantNoImage fails t (without stopping it) when a file is at p: a refused
// rebuild writes no image.
func wantNoImage(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an image was written: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func BenchmarkRebuild(b *testing.B) {
	benchRebuild(b, filepath.Join(examplesDir, "02-full-nocloud.json"))
}

// BenchmarkRebuildFwCfg is BenchmarkRebuild for an Ignition config
// delivered by fw_cfg (the config file, no image): example ignition/01.
func BenchmarkRebuildFwCfg(b *testing.B) {
	benchRebuild(b, filepath.Join(examplesDir, "ignition", "01-fcos-fwcfg.json"))
}

// benchRebuild rebuilds the payload of the job in jobFile, deleted before
// each round, from its recipe in a domain XML (parsed each round).
func benchRebuild(b *testing.B, jobFile string) {
	dir := "/dev/shm"
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = ""
	}
	parent, err := os.MkdirTemp(dir, "vmpayload-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(parent)
	data, err := os.ReadFile(jobFile)
	if err != nil {
		b.Fatal(err)
	}
	j, rep := job.Parse(data)
	if err := rep.Err(); err != nil {
		b.Fatal(err)
	}
	r, res := build(b, j, parent, secretsDir)
	_, el := newElement(b, r, res)
	dx := domainXML(el)
	b.ReportAllocs()
	for b.Loop() {
		if err := os.Remove(res.Path); err != nil {
			b.Fatal(err)
		}
		got, _, err := FromDomainXML(dx)
		if err != nil {
			b.Fatal(err)
		}
		if out, err := Rebuild(context.Background(), got, RebuildOptions{Keys: testKeys, PayloadDir: parent, SecretsDir: secretsDir, GID: -1}); err != nil || out != OutcomeRebuilt {
			b.Fatal(out, err)
		}
	}
}

// TestElementText checks the job's text in the element: bare quotes,
// escaped markup, and the characters XML cannot hold written as JSON
// escapes, so that any job comes back from the domain XML unchanged.
func TestElementText(t *testing.T) {
	content := "quotes \" ' <tag> & ]]> cr\r\nnon-characters \uFFFE \uFFFF, U+FFFD \uFFFD, U+EFBF \uEFBF, astral \U0001F600"
	j := &job.Job{Version: 1, Hostname: "h", Files: []job.File{{Path: "/etc/x", Content: content}}}
	r, res := build(t, j, t.TempDir(), "")
	rc, _ := newElement(t, r, res)
	el, err := rc.render(nil, true) // the job's text in clear (sealed, it is base64)
	must(t, err)
	text := el[strings.Index(el, "<vmpayload:job>"):]
	for _, bad := range []string{"&#34;", "&#39;", "<tag>", "\r", "\uFFFE", "\uFFFF"} {
		if strings.Contains(text, bad) {
			t.Errorf("job text holds %q: %s", bad, text)
		}
	}
	// json.Marshal writes markup and CR as JSON escapes itself
	for _, want := range []string{`\"`, "'", `\u003ctag\u003e`, `\u0026`, `]]\u003e`, `\r`, `\ufffe`, `\uffff`, "\uFFFD", "\uEFBF", "\U0001F600"} {
		if !strings.Contains(text, want) {
			t.Errorf("job text lacks %q: %s", want, text)
		}
	}
	// well-formed for a strict reader
	d := xml.NewDecoder(strings.NewReader(el))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("element is not well-formed: %v\n%s", err, el)
		}
	}
	back := roundTrip(t, el)
	if got := back.Job.Files[0].Content; got != content {
		t.Errorf("content changed in the round trip:\n%q\n%q", got, content)
	}
}

// TestWriteText checks the escaper on text json.Marshal does not produce
// (it escapes markup and CR itself) as well as on the non-characters.
func TestWriteText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":"b"}`, `{"a":"b"}`},
		{"<&>\r'\"", "&lt;&amp;&gt;&#xD;'\""},
		{"x\uFFFEy\uFFFFz", `x\ufffey\uffffz`},
		{"\uEFBF\uFFFD\xEF\xBF", "\uEFBF\uFFFD\xEF\xBF"},
		{"\xEF", "\xEF"},
		{"", ""},
	} {
		var b strings.Builder
		writeText(&b, []byte(c.in))
		if b.String() != c.want {
			t.Errorf("writeText(%q) = %q, want %q", c.in, b.String(), c.want)
		}
	}
}

// newElement makes the recipe of the image res written from r and renders
// its element, sealed with testKeys.
func newElement(t testing.TB, r *payload.Rendered, res payload.Result) (*Recipe, string) {
	t.Helper()
	return newElementWith(t, r, res, testKeys)
}

// newElementWith is newElement sealing with keys.
func newElementWith(t testing.TB, r *payload.Rendered, res payload.Result, keys *seal.Keyring) (*Recipe, string) {
	t.Helper()
	rc, err := New(r, res)
	if err != nil {
		t.Fatal(err)
	}
	el, err := rc.Element(keys)
	if err != nil {
		t.Fatal(err)
	}
	return rc, el
}

// roundTrip reads the recipe back from a domain XML holding el and checks
// that it renders the same element again.
func roundTrip(t *testing.T, el string) *Recipe {
	t.Helper()
	back, ok, err := FromDomainXML(domainXML(el))
	if err != nil || !ok {
		t.Fatalf("FromDomainXML: %v %v\n%s", ok, err, el)
	}
	again, _ := back.Element(testKeys)
	if !back.Sealed() { // a recipe in clear (the form before sealing)
		again, _ = back.render(nil, true)
	}
	if again != el {
		t.Errorf("element changed in the round trip:\n%s\n%s", el, again)
	}
	return back
}
