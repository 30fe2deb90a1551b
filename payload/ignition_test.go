package payload

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ignconfig "github.com/coreos/ignition/v2/config"
	"github.com/vincent-petithory/dataurl"
	"golang.org/x/crypto/ssh"

	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
)

// ignitionSecrets writes a password and an ed25519 host key into a new
// secrets directory and returns it with the key's public line.
func ignitionSecrets(t *testing.T) (dir, public string) {
	t.Helper()
	dir = t.TempDir()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string][]byte{"alice.pw": []byte("s3cret-plain\n"), "host.key": pem.EncodeToMemory(blk)} {
		if err := os.WriteFile(filepath.Join(dir, name), c, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))
}

const ignitionJob = `{"version":1,"domain":"n1","format":"ignition",%s"hostname":"n1.example.com","timezone":"UTC",
	"users":[{"name":"alice","password_secret":"alice.pw","groups":["wheel"]},{"name":"bob","password":"plain-bob"}],
	"files":[{"path":"/etc/motd","content":"hi\n"}],
	"ssh_host_keys":[{"type":"ed25519","private_key_secret":"host.key"}],
	"ignition":{"ignition":{"version":"3.5.0"},"systemd":{"units":[{"name":"x.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]}}}`

// TestIgnitionBuild builds each delivery through the one check and the
// image writer: the config file itself (fwcfg) or a config-2 or cidata
// image holding it as its only file; Ignition's config.Parse reads it
// without a warning; passwords are hashed exactly as the cloud-init path
// hashes them and never appear in plaintext.
func TestIgnitionBuild(t *testing.T) {
	dir, hostPub := ignitionSecrets(t)
	// the same users rendered for cloud-init give the hashes to expect
	ci := strings.Replace(strings.Replace(ignitionJob, `"format":"ignition",%s`, "", 1), `,
	"ignition":{"ignition":{"version":"3.5.0"},"systemd":{"units":[{"name":"x.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]}}}`, "}", 1)
	_, cc, rep := Check([]byte(ci), CheckOptions{Secrets: true, SecretsDir: dir, Build: true})
	if !rep.OK() {
		t.Fatal(rep.Err())
	}
	cr, err := Render(cc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantHashes := cr.Docs.PasswordHashes
	for _, c := range []struct {
		delivery, media, label, file string
	}{
		{"", "", "", IgnitionConfigName},
		{"configdrive", "iso", LabelConfigDrive, "openstack/latest/user_data"},
		{"configdrive", "vfat", LabelConfigDrive, "openstack/latest/user_data"},
		{"nocloud", "iso", LabelNoCloud, "user-data"},
		{"nocloud", "vfat", LabelNoCloud, "user-data"},
	} {
		t.Run(c.delivery+"-"+c.media, func(t *testing.T) {
			members := ""
			if c.delivery != "" {
				members = `"ignition_delivery":"` + c.delivery + `","media":"` + c.media + `",`
			}
			doc := strings.Replace(ignitionJob, "%s", members, 1)
			_, checked, rep := Check([]byte(doc), CheckOptions{Secrets: true, SecretsDir: dir, Build: true})
			if !rep.OK() {
				t.Fatal(rep.Err())
			}
			out := filepath.Join(t.TempDir(), "out")
			res, err := Build(context.Background(), checked, out, Options{GID: -1})
			if err != nil {
				t.Fatal(err)
			}
			if res.Format != "ignition" || res.Label != c.label || len(res.Files) != 1 || res.Files[0] != c.file {
				t.Errorf("result %+v", res)
			}
			var raw []byte
			if c.label == "" {
				raw, err = os.ReadFile(out)
				if fi, _ := os.Stat(out); err == nil && fi.Mode().Perm() != image.DefaultMode {
					t.Errorf("mode %v", fi.Mode())
				}
			} else {
				info, ierr := image.Inspect(out)
				if ierr != nil || info.Label != c.label || len(info.Files) != 1 || info.SHA256 != res.SHA256 {
					t.Fatalf("image %+v: %v", info, ierr)
				}
				raw, err = image.ReadFile(out, c.file)
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, rpt, err := ignconfig.Parse(raw)
			if err != nil || len(rpt.Entries) != 0 {
				t.Fatalf("config.Parse: %v %s", err, rpt.String())
			}
			// config.Parse translates to its latest spec: the text says the spec
			if !strings.Contains(string(raw), `"version":"3.5.0"`) || len(cfg.Ignition.Config.Merge) != 1 {
				t.Errorf("not spec 3.5.0 (the user's), or merges %d", len(cfg.Ignition.Config.Merge))
			}
			for i, u := range cfg.Passwd.Users {
				if u.PasswordHash == nil || *u.PasswordHash != wantHashes[i] || !strings.HasPrefix(wantHashes[i], "$6$") {
					t.Errorf("user %s hash %v, want the cloud-init path's %s", u.Name, u.PasswordHash, wantHashes[i])
				}
			}
			if strings.Contains(string(raw), "s3cret-plain") || strings.Contains(string(raw), "plain-bob") {
				t.Error("a plaintext password reached the config")
			}
			found := false
			for _, f := range cfg.Storage.Files {
				if f.Path == "/etc/ssh/ssh_host_ed25519_key.pub" {
					du, _ := dataurl.DecodeString(*f.Contents.Source)
					found = string(du.Data) == hostPub+"\n"
				}
			}
			if !found {
				t.Error("the host key's public half is not in the config")
			}
			// the same job gives the same bytes
			out2 := filepath.Join(t.TempDir(), "out")
			if res2, err := Build(context.Background(), checked, out2, Options{GID: -1}); err != nil || res2.SHA256 != res.SHA256 {
				t.Errorf("rebuild: %v, sha256 %s vs %s", err, res2.SHA256, res.SHA256)
			}
		})
	}
}

// TestIgnitionOnTheAgent: the agent takes every delivery (fw_cfg since
// the agent attaches the config file as a sysinfo entry) and checks the
// job to the end: a checked job to render.
func TestIgnitionOnTheAgent(t *testing.T) {
	dir, _ := ignitionSecrets(t)
	agent := CheckOptions{Secrets: true, SecretsDir: dir, Agent: true}
	for _, members := range []string{
		"",
		`"ignition_delivery":"fwcfg",`,
		`"ignition_delivery":"configdrive",`,
		`"ignition_delivery":"nocloud","media":"vfat",`,
	} {
		_, checked, r := Check([]byte(strings.Replace(ignitionJob, "%s", members, 1)), agent)
		if !r.OK() || checked == nil {
			t.Errorf("%s: %v (checked %v)", members, r.Err(), checked != nil)
		}
	}
	// offline, fw_cfg is what `vmpayload build` writes
	if _, _, r := Check([]byte(strings.Replace(ignitionJob, "%s", "", 1)), CheckOptions{Secrets: true, SecretsDir: dir, Build: true}); !r.OK() {
		t.Error(r.Err())
	}
}

func TestLabelOf(t *testing.T) {
	for _, c := range []struct {
		j    job.Job
		want string
	}{
		{job.Job{Format: job.FormatNoCloud}, LabelNoCloud},
		{job.Job{Format: job.FormatConfigDrive}, LabelConfigDrive},
		{job.Job{Format: job.FormatIgnition, IgnitionDelivery: job.DeliveryFwCfg}, ""},
		{job.Job{Format: job.FormatIgnition, IgnitionDelivery: job.DeliveryConfigDrive}, LabelConfigDrive},
		{job.Job{Format: job.FormatIgnition, IgnitionDelivery: job.DeliveryNoCloud}, LabelNoCloud},
	} {
		if got := LabelOf(c.j); got != c.want {
			t.Errorf("%s/%s: %q, want %q", c.j.Format, c.j.IgnitionDelivery, got, c.want)
		}
	}
}

// TestIgnitionExamples: the example Ignition jobs in
// configs/examples/ignition pass the one check, build, and give configs
// Ignition's config.Parse reads without a warning.
func TestIgnitionExamples(t *testing.T) {
	paths, err := filepath.Glob("../configs/examples/ignition/*.json")
	if err != nil || len(paths) < 3 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			_, checked, rep := Check(data, CheckOptions{Secrets: true, SecretsDir: "../configs/examples/secrets", Build: true})
			if !rep.OK() {
				t.Fatal(rep.Err())
			}
			r, err := Render(checked, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Docs.Files) != 1 {
				t.Fatalf("%d documents", len(r.Docs.Files))
			}
			if _, rpt, err := ignconfig.Parse(r.Docs.Files[0].Data); err != nil || len(rpt.Entries) != 0 {
				t.Fatalf("config.Parse: %v %s", err, rpt.String())
			}
			if _, err := r.Write(context.Background(), filepath.Join(t.TempDir(), r.ImageName("d")), Options{GID: -1, NoSync: true}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
