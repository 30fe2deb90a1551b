package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	ignconfig "github.com/coreos/ignition/v2/config"

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
// same bytes. (No Ignition runs here: Debian reads fw_cfg with the
// kernel's driver, the file Ignition's qemu platform reads.)
func TestAgentIgnitionFwCfgE2E(t *testing.T) {
	gate(t)
	if len(filter([]string{"ignition-fwcfg"}, func(s string) string { return s })) == 0 {
		t.Skip("filtered out by VMPAYLOAD_E2E_ONLY")
	}
	ctx, cancel := context.WithTimeout(context.Background(), caseWait)
	defer cancel()
	a, err := newAgent()
	if err != nil {
		t.Fatal(err)
	}
	cleanups := agenttest.ForTest(t)
	cleanups.Add(func() error {
		if !t.Failed() && os.Getenv("VMPAYLOAD_E2E_KEEP") == "" {
			return os.RemoveAll(a.Dir)
		}
		return nil
	})
	cleanups.Add(func() error { _ = a.Stop(); return nil })
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	tok := testenv.RandHex(t, 6)
	v, x := newVM(ctx, t, guest.Bookworm, "pc", guest.BusSCSI, nil, "modules-load=qemu_fw_cfg vmpx.paths="+fwcfgCoreOS+","+fwcfgFlatcar)
	v.agent = a
	// The hook rebuilds from the agent's directories; it acts on this
	// domain only (libvirtd is shared).
	hookCfg := filepath.Join(a.Dir, "hook.yaml")
	if err := os.WriteFile(hookCfg, []byte(fmt.Sprintf("payload_dir: %s\nsecrets_dir: %s\n", a.PayloadDir, a.SecretsDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	agenttest.InstallHook(t, "fwcfg-"+tok, v.g.Name, hookCfg, a.Bin)

	r := v.run(ctx, map[string]any{
		"id": "ign-fwcfg-" + tok, "action": "attach", "domain_xml": x, "format": "ignition",
		"hostname": "fc-" + tok[:6] + ".example.test", "timezone": "Europe/Berlin",
		"users": []any{map[string]any{"name": "core", "password": "e2e-" + tok, "groups": []any{"wheel"},
			"ssh_authorized_keys": []any{sshKey(t, "core@e2e")}}},
		"files":    []any{map[string]any{"path": "/etc/motd", "content": "fw_cfg " + tok + "\n", "permissions": "0644"}},
		"ignition": map[string]any{"ignition": map[string]any{"version": "3.6.0"}},
	})
	if r.Payload == nil || r.Payload.Format != "ignition" || r.Device != nil || !slices.Equal(r.FwCfg, []string{"opt/com.coreos/config", "opt/org.flatcar-linux/config"}) || r.TakesEffect != "" {
		t.Fatalf("result payload %+v, device %+v, fw_cfg %v, takes_effect %q", r.Payload, r.Device, r.FwCfg, r.TakesEffect)
	}
	built, err := os.ReadFile(r.Payload.Path)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(built); hex.EncodeToString(sum[:]) != r.Payload.SHA256 {
		t.Fatalf("the built config does not have the result's sha256")
	}

	// Boot 1: a plain `virsh start` of the domain the agent defined.
	v.start = time.Now()
	if o, err := guest.Virsh(ctx, v.g.URI, "start", v.g.Name); err != nil {
		t.Fatalf("virsh start: %v %s", err, o)
	}
	checkFwCfg(t, v.report(ctx), r)
	v.shutdown(ctx)
	if t.Failed() {
		return
	}

	// The host "reboots": the agent is gone and the payload directory
	// empty; the hook rebuilds the config before QEMU reads it.
	_ = a.Stop()
	ents, err := os.ReadDir(a.PayloadDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(a.PayloadDir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
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
