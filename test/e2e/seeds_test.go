package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/test/guest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// hostKeyPair makes a host key of type typ in the agent's secrets
// directory under name and returns its public key line.
func hostKeyPair(t *testing.T, a *agentProc, typ, name string) string {
	t.Helper()
	dir := a.SecretsDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, name)
	_ = os.Remove(f)
	_ = os.Remove(f + ".pub")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", typ, "-N", "", "-C", "vmpx-e2e-host", "-f", f).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	b, err := os.ReadFile(f + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f); _ = os.Remove(f + ".pub") })
	return strings.TrimSpace(string(b))
}

// keyBlob is the "type base64" part of a public key line.
func keyBlob(line string) string {
	f := strings.Fields(line)
	if len(f) < 2 {
		return line
	}
	return f[0] + " " + f[1]
}

// hostKeyFiles maps the guest's /etc/ssh/ssh_host_*_key.pub files (the
// report's ssh_host_keys section) to their content, and lists their paths.
func hostKeyFiles(rep *guest.Report) (map[string]string, string) {
	var fl struct {
		Files []guest.File `json:"files"`
	}
	if err := json.Unmarshal(rep.Raw["ssh_host_keys"], &fl); err != nil {
		return nil, "<no ssh_host_keys section>"
	}
	m := map[string]string{}
	var paths []string
	for _, f := range fl.Files {
		b, _ := f.Content()
		m[f.Path] = strings.TrimSpace(string(b))
		paths = append(paths, f.Path)
	}
	sort.Strings(paths)
	return m, strings.Join(paths, ",")
}

type seedsCase struct {
	name, suite, format, datasource string
	seedGen                         bool
}

func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// TestAgentSeedsE2E: the fields of issue 12 on real guests, one case per
// suite and format. Root's password and key, given host keys (exactly
// those, public keys equal), locale, the random seed reaching cloud-init's
// seed_random (its log line, copied by runcmd), a raw network_data on
// config-2, and power_state poweroff as the last step: the report's own
// power-off is turned off (vmpx.poweroff=0), so only cloud-init can leave
// the domain shut off. The condition waits for the report to be written.
// phone_home needs a guest network the tests do not have; it is judged by
// rendering and cloud-init's schema (payload's example tests).
//
// The locale is C.UTF-8: the guest images carry no `locales` package, and
// cloud-init runs locale-gen/update-locale for anything else.
//
// Run once (2026-11-23, load ≈ 17): bookworm passed every check (report
// after 620 s); trixie passed every check but the locale one, which read
// /etc/default/locale — a symlink to /etc/locale.conf on trixie, which the
// report does not follow — and now reads /etc/locale.conf as well.
func TestAgentSeedsE2E(t *testing.T) {
	gate(t)
	cases := []seedsCase{
		{"seeds-bookworm-nocloud", guest.Bookworm, "nocloud", "DataSourceNoCloud", false},
		{"seeds-trixie-configdrive", guest.Trixie, "configdrive", "DataSourceConfigDrive", true},
	}
	for i, c := range filter(cases, func(c seedsCase) string { return c.name }) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), caseWait)
			defer cancel()
			tok := testenv.RandHex(t, 6)
			mac := fmt.Sprintf("52:54:00:e3:40:%02x", i+1)
			v, x := newVM(ctx, t, c.suite, "pc", guest.BusSCSI, []guest.NIC{{MAC: mac}},
				"vmpx.poweroff=0 vmpx.paths=/etc/default/locale,/etc/locale.conf")
			rootPW := "root-" + testenv.RandHex(t, 8)
			rootKey := sshKey(t, "root@vmpx-e2e")
			defaultKey := sshKey(t, "ops@vmpx-e2e")
			edPub := hostKeyPair(t, v.agent, "ed25519", "seeds-ed25519-"+tok)
			ecPub := hostKeyPair(t, v.agent, "ecdsa", "seeds-ecdsa-"+tok)
			seedBytes := 64
			seed := map[string]any{"data": base64.StdEncoding.EncodeToString([]byte(strings.Repeat(tok[:8], 8)))}
			if c.seedGen {
				seedBytes = 256
				seed = map[string]any{"generate_bytes": seedBytes}
			}
			// the report unit runs after cloud-final; power_state's
			// condition is checked once cloud-init has exited, so it
			// waits (bounded) for the report to be on the console
			waitReport := "i=0; while [ $i -lt 900 ]; do systemctl is-active --quiet vmpx-report.service && exit 0; i=$((i+1)); sleep 1; done; exit 0"
			job := map[string]any{
				"id": "seeds-" + tok, "action": "start", "domain_xml": x, "format": c.format,
				"hostname":            "vmpx-seeds-" + tok[:6] + ".example.test",
				"users":               []any{map[string]any{"name": "root", "password": rootPW, "ssh_authorized_keys": []string{rootKey}}},
				"ssh_authorized_keys": []string{defaultKey},
				"ssh_host_keys": []any{
					map[string]any{"type": "ed25519", "private_key_secret": "seeds-ed25519-" + tok},
					map[string]any{"type": "ecdsa", "private_key_secret": "seeds-ecdsa-" + tok, "public_key": ecPub},
				},
				"locale":      "C.UTF-8",
				"random_seed": seed,
				"runcmd": []any{
					"mkdir -p /var/lib/vmpayload-e2e && grep -h 'random seed entropy' /var/log/cloud-init.log > /var/lib/vmpayload-e2e/seed-log || true",
				},
				"power_state": map[string]any{"mode": "poweroff", "message": "vmpx-seeds-" + tok, "timeout_seconds": 120,
					"condition": []string{"sh", "-c", waitReport}},
			}
			if c.format == "configdrive" {
				job["network_data"] = map[string]any{
					"links": []any{map[string]any{"id": "tap-" + tok[:4], "type": "phy", "ethernet_mac_address": mac, "name": "lan0"}},
					"networks": []any{map[string]any{"id": "net0", "type": "ipv4", "link": "tap-" + tok[:4], "ip_address": "198.51.100.40",
						"netmask": "255.255.255.0", "routes": []any{map[string]any{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "198.51.100.1"}},
						"network_id": "lan"}},
					"services": []any{map[string]any{"type": "dns", "address": "198.51.100.53"}},
				}
			} else {
				job["nics"] = []any{map[string]any{"name": "lan0", "mac": mac,
					"ipv4": map[string]any{"method": "static", "address": "198.51.100.40/24", "gateway": "198.51.100.1"}}}
			}
			r := v.run(ctx, job)
			rep := v.report(ctx)
			// power_state powers off right after cloud-init: the reporter's
			// unit is ordered before shutdown.target, so its report is in
			v.checkGuestDone(ctx, r, 1)
			if err := v.g.WaitShutdown(ctx); err != nil {
				t.Fatalf("power_state poweroff: the domain did not shut off: %v", err)
			}
			state, err := v.g.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rootHash, _ := rep.ShadowHash("root")
			rootKeys := rep.UserAuthorizedKeys("root")
			// trixie's /etc/default/locale is a symlink to /etc/locale.conf
			// (the report does not follow it); bookworm has the file
			var localeText []byte
			for _, p := range []string{"/etc/default/locale", "/etc/locale.conf"} {
				if f, ok := rep.File(p); ok && f.Type == "file" {
					localeText, _ = f.Content()
				}
			}
			seedLog, _ := rep.File("/var/lib/vmpayload-e2e/seed-log")
			seedText, _ := seedLog.Content()
			lan0, _ := rep.LinkByMAC(mac)
			keys, keyPaths := hostKeyFiles(rep)
			runChecks(t, rep, append(cloudInitChecks(rep, c.datasource),
				check{"agent result format", r.Payload.Format, c.format},
				check{"root shadow hash is SHA-512 crypt", strings.HasPrefix(rootHash, "$6$"), true},
				check{"root shadow hash verifies against the job's password (not locked)", verifyCrypt(t, rootHash, rootPW), true},
				check{"root authorized_keys holds the job's key without options", hasLine(rootKeys, rootKey), true},
				check{"default user authorized_keys", strings.Join(rep.UserAuthorizedKeys("debian"), "\n"), defaultKey},
				check{"host keys: exactly ed25519 and ecdsa", keyPaths, "/etc/ssh/ssh_host_ecdsa_key.pub,/etc/ssh/ssh_host_ed25519_key.pub"},
				check{"ed25519 host key is the given one", keyBlob(keys["/etc/ssh/ssh_host_ed25519_key.pub"]), keyBlob(edPub)},
				check{"ecdsa host key is the given one", keyBlob(keys["/etc/ssh/ssh_host_ecdsa_key.pub"]), keyBlob(ecPub)},
				check{"locale in /etc/default/locale (or /etc/locale.conf)", strings.Contains(string(localeText), "LANG=C.UTF-8"), true},
				check{"seed_random added the seed", strings.Contains(string(seedText), fmt.Sprintf("adding %d bytes of random seed entropy", seedBytes)), true},
				check{"lan0 static address", lan0.HasAddr("198.51.100.40", 24), true},
				check{"power_state poweroff left the domain shut off", state, "shut off"},
			))
			t.Logf("seed_random log: %q; root authorized_keys: %q", seedText, rootKeys)
		})
	}
}
