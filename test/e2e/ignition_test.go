package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ignconfig "github.com/coreos/ignition/v2/config"
	igntypes "github.com/coreos/ignition/v2/config/v3_7_experimental/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/guest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// The fw_cfg files as the guest kernel's qemu_fw_cfg driver shows them.
const (
	fwcfgCoreOS  = "/sys/firmware/qemu_fw_cfg/by_name/opt/com.coreos/config/raw"
	fwcfgFlatcar = "/sys/firmware/qemu_fw_cfg/by_name/opt/org.flatcar-linux/config/raw"
)

// TestAgentIgnitionFwCfgE2E: an Ignition config delivered by fw_cfg
// (issue 34) reaches a real guest byte for byte. The agent runs the job
// (the domain defined from domain_xml, not started); boot 1 is a plain
// `virsh start`; the Debian guest loads qemu_fw_cfg (modules-load= on its
// kernel command line) and its report carries both fw_cfg files, which
// must have the sha256 of the config the agent built (and Ignition's
// config.Parse must read the bytes the guest read without a warning).
// Then the host "reboots" without the agent: the payload directory is
// emptied and the libvirt hook (the packaged script, for this domain only)
// rebuilds the config at `virsh start`'s prepare begin; boot 2 reads the
// same bytes.
//
// Boot 1 also runs Ignition's own fetch stage in the guest: the test
// builds Ignition's binary from the module version in go.mod (see
// ignitionBinary) and gives it to the guest on a second CD-ROM, a NoCloud
// seed (label cidata) whose cloud-config runcmd mounts it and runs
// `ignition -platform qemu -stage fetch-offline` against the fw_cfg entry.
// runcmd runs in cloud-final, which the report unit is ordered after, so
// the report carries Ignition's cached config (the fetched config with the
// user's merge child applied), its log and exit code; checkIgnitionCache
// judges them. The Ignition config itself reaches the guest by fw_cfg only.
func TestAgentIgnitionFwCfgE2E(t *testing.T) {
	gateCase(t, "ignition-fwcfg")
	ctx, cancel := context.WithTimeout(context.Background(), caseWait)
	defer cancel()
	a := startOwnAgent(t)
	tok := testenv.RandHex(t, 6)
	// Built (or taken from the cache) before the guest exists: a build
	// failure fails the test here, clearly.
	ignBin := ignitionBinary(t, image(t, guest.Bookworm))
	v, _ := newVM(ctx, t, guest.Bookworm, "pc", guest.BusSCSI, nil, "modules-load=qemu_fw_cfg vmpx.paths="+fwcfgCoreOS+","+fwcfgFlatcar)
	v.agent = a
	seed := filepath.Join(v.g.Dir, "ignition-fetch.iso")
	if err := ignitionFetchSeed(ctx, seed, ignBin); err != nil {
		t.Fatal(err)
	}
	x, err := v.g.XMLWithCDROM(seed, guest.BusSCSI)
	if err != nil {
		t.Fatal(err)
	}
	// The hook rebuilds from the agent's directories; it acts on this
	// domain only (libvirtd is shared).
	hookCfg := filepath.Join(a.Dir, "hook.yaml")
	if err := os.WriteFile(hookCfg, []byte(fmt.Sprintf("payload_dir: %s\nsecrets_dir: %s\n", a.PayloadDir, a.SecretsDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	agenttest.InstallHook(t, "fwcfg-"+tok, v.g.Name, hookCfg, a.Bin)

	// The user's config (the merge child) adds a file and a second key
	// for core: in Ignition's cache both show that the merge was applied.
	w := ignWant{host: "fc-" + tok[:6] + ".example.test", tz: "Europe/Berlin", password: "e2e-" + tok,
		jobKey: sshKey(t, "core@e2e"), userKey: sshKey(t, "core-user@e2e"),
		motd: "fw_cfg " + tok + "\n", userFile: "/etc/vmpx-user-merge", userContent: "merged " + tok + "\n"}
	r := v.run(ctx, map[string]any{
		"id": "ign-fwcfg-" + tok, "action": "attach", "domain_xml": x, "format": "ignition",
		"hostname": w.host, "timezone": w.tz,
		"users": []any{map[string]any{"name": "core", "password": w.password, "groups": []any{"wheel"},
			"ssh_authorized_keys": []any{w.jobKey}}},
		"files": []any{map[string]any{"path": "/etc/motd", "content": w.motd, "permissions": "0644"}},
		"ignition": map[string]any{"ignition": map[string]any{"version": "3.6.0"},
			"passwd": map[string]any{"users": []any{map[string]any{"name": "core", "sshAuthorizedKeys": []any{w.userKey}}}},
			"storage": map[string]any{"files": []any{map[string]any{"path": w.userFile, "mode": 420,
				"contents": map[string]any{"source": "data:;base64," + base64.StdEncoding.EncodeToString([]byte(w.userContent))}}}}},
	})
	if r.Payload == nil || r.Payload.Format != "ignition" || r.Device != nil || !slices.Equal(r.FwCfg, []string{"opt/com.coreos/config", "opt/org.flatcar-linux/config"}) || r.TakesEffect != "" {
		t.Fatalf("result payload %+v, device %+v, fw_cfg %v, takes_effect %q", r.Payload, r.Device, r.FwCfg, r.TakesEffect)
	}
	built, err := os.ReadFile(r.Payload.Path)
	if err != nil {
		t.Fatal(err)
	}
	if testenv.SHA256(built) != r.Payload.SHA256 {
		t.Fatalf("the built config does not have the result's sha256")
	}

	// Boot 1: a plain `virsh start` of the domain the agent defined.
	v.start = time.Now()
	if o, err := guest.Virsh(ctx, v.g.URI, "start", v.g.Name); err != nil {
		t.Fatalf("virsh start: %v %s", err, o)
	}
	rep := v.report(ctx)
	checkFwCfg(t, rep, r)
	checkIgnitionCache(t, rep, built, w)
	v.shutdown(ctx)
	if t.Failed() {
		return
	}

	// The host "reboots": the agent is gone and the payload directory
	// empty; the hook rebuilds the config before QEMU reads it.
	hostReboot(t, a)
	v.start = time.Now()
	if o, err := guest.Virsh(ctx, v.g.URI, "start", v.g.Name); err != nil {
		t.Fatalf("virsh start after the payload directory was emptied: %v %s", err, o)
	}
	if b, err := os.ReadFile(r.Payload.Path); err != nil || string(b) != string(built) {
		t.Errorf("the hook did not rebuild the config byte-identical (%v)", err)
	}
	checkFwCfg(t, v.report(ctx), r)
	v.shutdown(ctx)
}

// checkFwCfg fails unless the guest's report carries both Ignition fw_cfg
// files with the sha256 of the config r built, and Ignition parses what
// the guest read without a warning.
func checkFwCfg(t *testing.T, rep *guest.Report, r result.Result) {
	t.Helper()
	for _, p := range []string{fwcfgCoreOS, fwcfgFlatcar} {
		f, ok := rep.File(p)
		if !ok || f.Error != "" {
			t.Errorf("the guest has no %s (%+v); kernel %s", p, f, rep.Meta.Kernel)
			continue
		}
		if f.SHA256 != r.Payload.SHA256 {
			t.Errorf("the guest read %s with sha256 %s, the agent built %s", p, f.SHA256, r.Payload.SHA256)
		}
		if b, ok := f.Content(); ok {
			if _, rpt, err := ignconfig.Parse(b); err != nil || len(rpt.Entries) != 0 {
				t.Errorf("config.Parse of what the guest read at %s: %v %s", p, err, rpt.String())
			}
		}
	}
}

// ignitionModule is the module whose own binary judges the config in the
// guest; its version is the one go.mod requires.
const ignitionModule = "github.com/coreos/ignition/v2"

// Where the guest's fetch script leaves Ignition's output (below
// /var/lib/vmpayload-e2e, which every report lists).
const (
	ignOutDir = "/var/lib/vmpayload-e2e/ignition"
	ignCache  = ignOutDir + "/config.json"
	ignLog    = ignOutDir + "/fetch.log"
	ignRC     = ignOutDir + "/rc"
)

// ignitionBinary returns Ignition's own binary (the module's
// ./internal main package, which is what distributions install as
// /usr/lib/dracut/modules.d/30ignition/ignition), built once per Ignition
// version and cached next to the guest images. It is built in a scratch
// module with cgo (Ignition links libblkid: Debian's libblkid-dev, from
// test/deps.sh); it then needs only libblkid.so.1 and libc, both in the
// Debian guest. A failed build fails the test: the guest check must not
// be skipped silently.
func ignitionBinary(t *testing.T, img *guest.Image) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", ignitionModule).Output()
	if err != nil {
		t.Fatalf("finding the version of %s in go.mod: %v", ignitionModule, err)
	}
	version := strings.TrimSpace(string(out))
	bin := filepath.Join(filepath.Dir(img.Dir), "ignition-"+version, "ignition")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	start := time.Now()
	scratch := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = scratch
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building Ignition %s for the guest (needs cgo and libblkid-dev, see test/deps.sh): go %s: %v\n%s",
				version, strings.Join(args, " "), err, tail(string(b), 30))
		}
	}
	run("mod", "init", "vmpx-ignition-build")
	run("get", ignitionModule+"/internal@"+version)
	tmp := filepath.Join(scratch, "ignition")
	run("build", "-trimpath", "-ldflags=-s -w", "-o", tmp, ignitionModule+"/internal")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	// Copied under a temporary name of its own and renamed: a run killed
	// midway leaves no half binary under the cached name, and two test
	// processes building at once do not mix their copies.
	b, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	part, err := os.CreateTemp(filepath.Dir(bin), ".ignition-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(part.Name())
	if _, err := part.Write(b); err != nil {
		part.Close()
		t.Fatal(err)
	}
	if err := part.Chmod(0o755); err != nil {
		part.Close()
		t.Fatal(err)
	}
	if err := part.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(part.Name(), bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING built Ignition %s for the guest in %.1fs (%d bytes)", version, time.Since(start).Seconds(), len(b))
	return bin
}

// ignitionFetchSeed writes a NoCloud seed ISO (label cidata) holding
// Ignition's binary, a script that runs its fetch-offline stage, and a
// cloud-config whose runcmd mounts the seed and runs the script. (A
// NoCloud seed because cloud-init's runcmd is the guest image's existing
// way to run a command before the report unit, which is ordered after
// cloud-final.)
func ignitionFetchSeed(ctx context.Context, iso, ignBin string) error {
	dir, err := os.MkdirTemp("", "vmpx-ignfetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"meta-data": "instance-id: vmpx-ignition-fetch\n",
		"user-data": "#cloud-config\nruncmd:\n" +
			"  - [mkdir, -p, /mnt/vmpx-ignition]\n" +
			"  - [mount, -o, ro, /dev/disk/by-label/cidata, /mnt/vmpx-ignition]\n" +
			"  - [sh, /mnt/vmpx-ignition/fetch.sh]\n",
		// fetch-offline is the stage that runs first in the initramfs;
		// with only data: URLs it needs no network. -log-to-stdout: the
		// guest's journal is not reported.
		"fetch.sh": "#!/bin/sh\n" +
			"mkdir -p " + ignOutDir + "\n" +
			"/mnt/vmpx-ignition/ignition -platform qemu -stage fetch-offline -config-cache " + ignCache +
			" -log-to-stdout >" + ignLog + " 2>&1\n" +
			"echo $? >" + ignRC + "\n",
	}
	args := []string{"-quiet", "-J", "-r", "-V", "cidata", "-o", iso, "-graft-points"}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
		args = append(args, name+"="+p)
	}
	args = append(args, "ignition="+ignBin)
	if out, err := exec.CommandContext(ctx, "genisoimage", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("making the Ignition fetch seed with genisoimage: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.Chmod(iso, 0o644); err != nil {
		return err
	}
	return guest.MakeTraversable(filepath.Dir(iso))
}

// ignWant is what the job asked for, to be found in Ignition's cache.
type ignWant struct {
	host, tz, password, jobKey, userKey, motd string
	userFile, userContent                     string
}

// checkIgnitionCache fails unless Ignition's fetch-offline stage ran in
// the guest without an error and the config it cached (the fw_cfg config
// with its merge child applied) carries every field of the job and the
// user's config. built is the config the agent wrote.
func checkIgnitionCache(t *testing.T, rep *guest.Report, built []byte, w ignWant) {
	t.Helper()
	logf, _ := rep.File(ignLog)
	log, _ := logf.Content()
	rcf, ok := rep.File(ignRC)
	rc, _ := rcf.Content()
	if !ok || strings.TrimSpace(string(rc)) != "0" {
		t.Errorf("Ignition's fetch-offline stage in the guest: exit code %q (reported: %v); its log:\n%s", rc, ok, tail(string(log), 40))
		return
	}
	cf, ok := rep.File(ignCache)
	raw, okc := cf.Content()
	if !ok || !okc {
		t.Errorf("the guest reports no Ignition cache %s (%+v); Ignition's log:\n%s", ignCache, cf, tail(string(log), 40))
		return
	}
	t.Logf("Ignition %s in the guest: cached config of %d bytes; log tail:\n%s", ignitionModule, len(raw), tail(string(log), 8))
	cfg, rpt, err := ignconfig.Parse(raw)
	if err != nil || len(rpt.Entries) != 0 {
		t.Errorf("config.Parse of Ignition's cache: %v %s", err, rpt.String())
		return
	}
	top, _, err := ignconfig.Parse(built)
	if err != nil {
		t.Fatalf("config.Parse of the built config: %v", err)
	}
	// The generated config names the user's config in ignition.config.merge
	// as a data: URL; Ignition fetched and merged it (the checks below find
	// the user's file and key), and its cache keeps the reference (its merge
	// code leaves the parent's ignition section as it is) next to the
	// applied result.
	if len(top.Ignition.Config.Merge) != 1 || top.Ignition.Config.Merge[0].Source == nil || !strings.HasPrefix(*top.Ignition.Config.Merge[0].Source, "data:") {
		t.Errorf("the built config's ignition.config.merge is %+v, want the user's config as one data: URL", top.Ignition.Config.Merge)
	}
	var got, want []string
	for _, l := range []struct {
		rs  []igntypes.Resource
		out *[]string
	}{{cfg.Ignition.Config.Merge, &got}, {top.Ignition.Config.Merge, &want}} {
		for _, r := range l.rs {
			if r.Source != nil {
				*l.out = append(*l.out, *r.Source)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Ignition's cache names the merged configs %q, the built config %q", got, want)
	}

	file := func(path string) (string, bool) {
		for _, f := range cfg.Storage.Files {
			if f.Path != path {
				continue
			}
			if f.Contents.Source == nil {
				return "", true
			}
			d, err := dataurl.DecodeString(*f.Contents.Source)
			if err != nil {
				t.Errorf("Ignition's cache: %s: contents %q: %v", path, *f.Contents.Source, err)
				return "", true
			}
			return string(d.Data), true
		}
		return "", false
	}
	for path, want := range map[string]string{"/etc/hostname": w.host + "\n", "/etc/motd": w.motd, w.userFile: w.userContent} {
		if got, ok := file(path); !ok || got != want {
			t.Errorf("Ignition's cache: %s is %q (present: %v), want %q", path, got, ok, want)
		}
	}
	var link *igntypes.Link
	for i := range cfg.Storage.Links {
		if cfg.Storage.Links[i].Path == "/etc/localtime" {
			link = &cfg.Storage.Links[i]
		}
	}
	if want := "/usr/share/zoneinfo/" + w.tz; link == nil || link.Target == nil || *link.Target != want {
		t.Errorf("Ignition's cache: /etc/localtime link %+v, want target %s", link, want)
	}
	var core *igntypes.PasswdUser
	for i := range cfg.Passwd.Users {
		if cfg.Passwd.Users[i].Name == "core" {
			if core != nil {
				t.Errorf("Ignition's cache has the user core twice")
			}
			core = &cfg.Passwd.Users[i]
		}
	}
	if core == nil {
		t.Errorf("Ignition's cache has no user core: %+v", cfg.Passwd.Users)
		return
	}
	if core.PasswordHash == nil || !verifyCrypt(t, *core.PasswordHash, w.password) {
		t.Errorf("Ignition's cache: core's password hash does not verify against the job's password")
	}
	var keys []string
	for _, k := range core.SSHAuthorizedKeys {
		keys = append(keys, string(k))
	}
	// The job's key from the generated config and the user's key from the
	// merge child: Ignition joins the lists.
	if !slices.Contains(keys, w.jobKey) || !slices.Contains(keys, w.userKey) {
		t.Errorf("Ignition's cache: core's keys %q, want both %q (job) and %q (user's config)", keys, w.jobKey, w.userKey)
	}
	if !slices.Contains(core.Groups, "wheel") {
		t.Errorf("Ignition's cache: core's groups %q lack wheel", core.Groups)
	}
	if bytes.Contains(raw, []byte(w.password)) {
		t.Errorf("Ignition's cache carries the plaintext password")
	}
}
