package ignconvert

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	ignconfig "github.com/coreos/ignition/v2/config"
)

// TestConvertCTOutput: a spec 2.3.0 config written as the Container Linux
// Config Transpiler (ct) writes it (every section present, filesystem
// "root", empty verification objects) converts to spec 3.1.0, which the
// current Ignition's config.Parse reads without an error or a warning, and
// every entry of the spec 2 config is in it at its spec 3 place.
func TestConvertCTOutput(t *testing.T) {
	raw, err := os.ReadFile("testdata/ct-2.3.ign")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Convert(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg, rpt, err := ignconfig.Parse(out)
	if err != nil || len(rpt.Entries) != 0 {
		t.Fatalf("config.Parse of the converted config: %v %s\n%s", err, rpt.String(), out)
	}
	if cfg.Ignition.Version != "3.6.0" && cfg.Ignition.Version != "3.1.0" {
		// config.Parse translates up to its newest stable spec
		t.Logf("parsed as %s", cfg.Ignition.Version)
	}
	var m struct {
		Ignition struct{ Version string }
	}
	if err := json.Unmarshal(out, &m); err != nil || m.Ignition.Version != "3.1.0" {
		t.Errorf("converted spec %q (%v), want 3.1.0", m.Ignition.Version, err)
	}
	files := map[string]string{}
	for _, f := range cfg.Storage.Files {
		files[f.Path] = *f.Contents.Source
	}
	if files["/etc/motd"] != "data:,written%20by%20ct%0A" || files["/etc/flatcar/update.conf"] != "data:,REBOOT_STRATEGY%3Doff%0A" {
		t.Errorf("files %v", files)
	}
	if len(cfg.Storage.Directories) != 1 || cfg.Storage.Directories[0].Path != "/opt/app" || *cfg.Storage.Directories[0].Mode != 0o755 {
		t.Errorf("directories %+v", cfg.Storage.Directories)
	}
	if len(cfg.Storage.Links) != 1 || cfg.Storage.Links[0].Path != "/etc/localtime" || *cfg.Storage.Links[0].Target != "/usr/share/zoneinfo/Europe/Berlin" {
		t.Errorf("links %+v", cfg.Storage.Links)
	}
	if len(cfg.Passwd.Users) != 1 || cfg.Passwd.Users[0].Name != "core" || len(cfg.Passwd.Users[0].SSHAuthorizedKeys) != 1 || len(cfg.Passwd.Users[0].Groups) != 2 {
		t.Errorf("users %+v", cfg.Passwd.Users)
	}
	units := map[string]bool{}
	for _, u := range cfg.Systemd.Units {
		units[u.Name] = u.Enabled != nil && *u.Enabled
		if u.Name == "docker.service" && (len(u.Dropins) != 1 || u.Dropins[0].Name != "10-debug.conf") {
			t.Errorf("docker.service dropins %+v", u.Dropins)
		}
	}
	if enabled, ok := units["hello.service"]; !ok || !enabled {
		t.Errorf("units %v", units)
	}
}

// TestConvertRefusals: what spec 2 has and spec 3 cannot carry, and what
// Ignition v0.x refuses, is an error naming the tool's finding.
func TestConvertRefusals(t *testing.T) {
	for _, c := range []struct{ name, raw, msg string }{
		{"networkd units", `{"ignition":{"version":"2.3.0"},"networkd":{"units":[{"name":"00-eth0.network","contents":"[Match]\nName=eth0\n"}]}}`, "networkd"},
		{"filesystem other than root", `{"ignition":{"version":"2.3.0"},"storage":{"filesystems":[{"name":"data","mount":{"device":"/dev/vdb","format":"ext4"}}],"files":[{"filesystem":"data","path":"/x","contents":{"source":"data:,x"}}]}}`, "data"},
		{"relative path", `{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"etc/motd","contents":{"source":"data:,x"}}]}}`, "path not absolute"},
		{"unknown version", `{"ignition":{"version":"2.9.0"}}`, "Ignition v0.x refuses"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Convert([]byte(c.raw))
			if err == nil || !strings.Contains(err.Error(), c.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line saying %q", err, c.msg)
			}
		})
	}
}
