package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/test/golden"
	"github.com/vmpayload/vmpayload/test/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/run")

const (
	testKey2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGnB6Vn5Y1lC2Y6lCwXjCqg6bZ0cG3o8eYc3c8bq7lqS admin@example"
)

// runFixtures writes the files the run tests read and changes into their
// directory, so flags use short relative names.
func runFixtures(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"alice.pub":  "# alice's key\n" + testenv.KeyAlice + "\n\n",
		"admin.pub":  testKey2 + "\n",
		"alice.pw":   "correct horse\n",
		"root.pw":    "root secret\r\n",
		"two.pw":     "line one\nline two\n",
		"empty.pw":   "",
		"alice.hash": testenv.HashA + "\n",
		"motd":       "Welcome to web1\n",
		"blob.bin":   "\x00\x01\x02\xff",
		"extra.yaml": "#cloud-config\npackages: [nginx]\n",
		"vendor.txt": "#cloud-config\nbootcmd: [\"true\"]\n",
		"net.yaml":   "version: 2\nethernets:\n  id0:\n    match: {macaddress: '52:54:00:12:34:56'}\n    dhcp4: true\n",
		"nd.json":    `{"links": [{"id": "l0", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:56", "mtu": 1500}], "networks": [{"id": "n0", "type": "ipv4_dhcp", "link": "l0"}]}`,
		"meta.json":  `{"availability-zone": "rack-3", "weight": 12345678901234567}`,
		"seed.bin":   "0123456789abcdef0123",
		"host.pub":   "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGnB6Vn5Y1lC2Y6lCwXjCqg6bZ0cG3o8eYc3c8bq7lqS host@web1\n",
		"dom.xml":    "<domain type='qemu'><name>web1</name><memory unit='MiB'>64</memory><os><type>hvm</type></os></domain>",
		"list.json":  `[1, 2]`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
}

// runJob runs "vmpayload run --print-job ARGS" with stdin as standard input.
func runJob(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	old := runStdin
	runStdin = strings.NewReader(stdin)
	defer func() { runStdin = old }()
	var out, errb bytes.Buffer
	code := run(append([]string{"run", "--print-job"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestRunJobs: flags become the job document in testdata/run/NAME.json,
// and the document passes the job validation the agent applies.
func TestRunJobs(t *testing.T) {
	goldenDir, err := filepath.Abs("testdata/run")
	if err != nil {
		t.Fatal(err)
	}
	runFixtures(t)
	cases := []struct {
		name  string
		stdin string
		args  []string
	}{
		{"minimal", "", []string{"web1"}},
		// the example of issue 16, flag for flag
		{"issue-example", "", []string{"web1", "--hostname", "web1.example.com", "--ssh-key", "alice.pub",
			"--user", "alice", "--password-file", "./alice.pw", "--root-password-file", "./root.pw", "--timezone", "Europe/Berlin",
			"--nic", "52:54:00:12:34:56,ip=192.0.2.10/24,gw=192.0.2.1", "--dns", "192.0.2.53", "--file", "./motd:/etc/motd:0644",
			"--runcmd", "systemctl enable --now nginx", "--user-data", "./extra.yaml", "--format", "configdrive", "--wait"}},
		{"flags-after-domain-and-stdin-password", "from stdin\n", []string{"--hostname=web1", "web1", "--user", "alice",
			"--password-file", "-", "--sudo", "ALL=(ALL) NOPASSWD:ALL", "--groups", "adm,sudo", "--shell", "/bin/bash",
			"--lock-password=false", "--ssh-key", "alice.pub", "--default-ssh-key", "admin.pub"}},
		{"default-user-keys", "", []string{"web1", "--ssh-key", "alice.pub", "--ssh-key", "admin.pub", "--ssh-password-auth=false",
			"--regenerate-ssh-host-keys"}},
		{"root-and-hash", "", []string{"web1", "--user", "alice", "--password-hash-file", "alice.hash", "--root-password-secret", "root.pw",
			"--root-ssh-key", "admin.pub", "--root-lock-password"}},
		{"network", "", []string{"web1", "--nic", "52:54:00:12:34:56,name=eth0,ip=192.0.2.10/24,gw=192.0.2.1,ip6=2001:db8::10/64,gw6=fe80::1,mtu=1500",
			"--nic", "52:54:00:12:34:57,ip=dhcp,ip6=slaac", "--dns", "192.0.2.53,2001:db8::53", "--dns-search", "example.com"}},
		{"network-config", "", []string{"web1", "--network-config", "net.yaml"}},
		{"network-data", "", []string{"web1", "--format", "configdrive", "--network-data", "nd.json", "--meta-data", "meta.json", "--meta", "role=web"}},
		{"content", "", []string{"web1", "--file", "motd:/etc/motd", "--file", "blob.bin:/opt/blob:0600:root:root",
			"--runcmd", "echo hi > /tmp/x", "--runcmd-argv", `["touch", "/var/lib/provisioned"]`,
			"--user-data", "extra.yaml", "--user-data-mode", "merge", "--vendor-data", "vendor.txt", "--instance-id", "iid-web1-1"}},
		{"seeds", "", []string{"web1", "--locale", "en_US.UTF-8", "--ssh-host-key", "ed25519:web1-host-ed25519:host.pub",
			"--ssh-host-key", "rsa:web1-host-rsa", "--power-state", "poweroff", "--power-delay", "2", "--power-message", "provisioned",
			"--power-timeout", "60", "--power-condition", "test -e /etc/ssh/ssh_host_ed25519_key",
			"--phone-home", "https://cfg.example.com/ready/$INSTANCE_ID", "--phone-home-post", "instance_id,pub_key_ed25519",
			"--phone-home-tries", "3", "--random-seed-file", "seed.bin"}},
		{"generated-seed", "", []string{"web1", "--random-seed-bytes", "64", "--user-data-secret", "web1.yaml"}},
		{"attach-vfat", "", []string{"web1", "--attach", "--media", "vfat", "--id", "web1-attach-1", "--hostname", "web1"}},
		{"detach", "", []string{"web1", "--detach", "--id", "web1-detach"}},
		{"prebuilt", "", []string{"web1", "--prebuilt-image", "/var/lib/seeds/web1.iso"}},
		{"domain-xml", "", []string{"web1", "--domain-xml", "dom.xml", "--hostname", "web1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errb := runJob(t, c.stdin, c.args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errb)
			}
			// the printed document passes the agent's check
			j, _, rep := payload.Check([]byte(out), payload.CheckOptions{Agent: true})
			if !rep.OK() {
				t.Fatalf("the printed job is invalid: %v\n%s", rep.Err(), out)
			}
			if j.Domain != "web1" || j.Version != job.Version {
				t.Errorf("domain %q version %d", j.Domain, j.Version)
			}
			golden.Compare(t, filepath.Join(goldenDir, c.name+".json"), []byte(out), *update)
		})
	}
}

// TestRunErrors: every bad flag is reported naming the flag; bad values
// the job validation finds are reported with the flag that gave them.
// Passwords never appear in the messages.
func TestRunErrors(t *testing.T) {
	runFixtures(t)
	cases := []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  []string
	}{
		{"no domain", "", nil, exitUsage, []string{"domain name is missing"}},
		{"two domains", "", []string{"a", "b"}, exitUsage, []string{"one domain at a time"}},
		{"password on argv is no flag", "", []string{"web1", "--password", "x"}, exitUsage, []string{"unknown flag: --password"}},
		{"attach and detach", "", []string{"web1", "--attach", "--detach"}, exitUsage, []string{"--attach and --detach"}},
		{"detach with content", "", []string{"web1", "--detach", "--hostname", "x"}, exitUsage, []string{"--hostname"}},
		{"password without user", "", []string{"web1", "--password-file", "alice.pw"}, exitUsage, []string{"--password-file needs --user"}},
		{"missing password file", "", []string{"web1", "--user", "alice", "--password-file", "nope.pw"}, exitUsage, []string{`--password-file "nope.pw"`, "no such file"}},
		{"two-line password", "", []string{"web1", "--user", "alice", "--password-file", "two.pw"}, exitUsage, []string{"--password-file two.pw", "more than one line"}},
		{"empty password", "", []string{"web1", "--root-password-file", "empty.pw"}, exitUsage, []string{"--root-password-file empty.pw", "empty"}},
		{"stdin twice", "pw\n", []string{"web1", "--user", "alice", "--password-file", "-", "--root-password-file", "-"}, exitUsage,
			[]string{"--root-password-file -: standard input is already read by --password-file"}},
		{"nic key", "", []string{"web1", "--nic", "52:54:00:12:34:56,addr=1.2.3.4"}, exitUsage, []string{`--nic "52:54:00:12:34:56,addr=1.2.3.4"`, `unknown key "addr"`}},
		{"nic gw without ip", "", []string{"web1", "--nic", "52:54:00:12:34:56,gw=1.2.3.4"}, exitUsage, []string{"--nic", "gw needs a static ip"}},
		{"nic mtu", "", []string{"web1", "--nic", "52:54:00:12:34:56,mtu=big"}, exitUsage, []string{"--nic", `mtu "big"`}},
		{"nic no mac", "", []string{"web1", "--nic", "ip=dhcp"}, exitUsage, []string{"--nic", "MAC address"}},
		{"file spec", "", []string{"web1", "--file", "motd"}, exitUsage, []string{`--file "motd"`, "SRC:DEST"}},
		{"runcmd-argv", "", []string{"web1", "--runcmd-argv", "touch /x"}, exitUsage, []string{"--runcmd-argv", "JSON array"}},
		{"meta", "", []string{"web1", "--meta", "novalue"}, exitUsage, []string{`--meta "novalue"`, "KEY=VALUE"}},
		{"network-data not object", "", []string{"web1", "--network-data", "list.json"}, exitUsage, []string{"--network-data list.json", "JSON object"}},
		{"host key spec", "", []string{"web1", "--ssh-host-key", "ed25519"}, exitUsage, []string{`--ssh-host-key "ed25519"`}},
		{"power extras alone", "", []string{"web1", "--power-delay", "3"}, exitUsage, []string{"--power-delay needs --power-state"}},
		{"phone-home extras alone", "", []string{"web1", "--phone-home-tries", "3"}, exitUsage, []string{"--phone-home-tries needs --phone-home"}},
		{"bad bool", "", []string{"web1", "--ssh-password-auth=maybe"}, exitUsage, []string{"--ssh-password-auth", `"maybe"`}},
		// found by the job's validation, reported with the flag
		{"bad hostname", "", []string{"web1", "--hostname", "-x-"}, exitInvalid, []string{`--hostname "-x-": hostname: "-x-"`}},
		{"bad domain", "", []string{"we/b1"}, exitInvalid, []string{`DOMAIN "we/b1": domain:`}},
		{"bad timezone", "", []string{"web1", "--timezone", "Mars/Base"}, exitInvalid, []string{`--timezone "Mars/Base": timezone:`}},
		{"bad gateway", "", []string{"web1", "--nic", "52:54:00:12:34:56,ip=192.0.2.10/24,gw=198.51.100.1"}, exitInvalid,
			[]string{`--nic "52:54:00:12:34:56,ip=192.0.2.10/24,gw=198.51.100.1": nics[0].ipv4.gateway:`}},
		{"bad mac", "", []string{"web1", "--nic", "52-54-00-12-34-56,ip=dhcp"}, exitInvalid, []string{`--nic "52-54-00-12-34-56,ip=dhcp": nics[0].mac:`}},
		{"second nic", "", []string{"web1", "--nic", "52:54:00:12:34:56,ip=dhcp", "--nic", "52:54:00:12:34:57,ip=slaac"}, exitInvalid,
			[]string{`--nic "52:54:00:12:34:57,ip=slaac": nics[1].ipv4.method:`}},
		{"dns without nic", "", []string{"web1", "--dns", "192.0.2.53"}, exitInvalid, []string{"--dns: dns:"}},
		{"bad dns", "", []string{"web1", "--nic", "52:54:00:12:34:56,ip=dhcp", "--dns", "192.0.2.999"}, exitInvalid,
			[]string{`--dns "192.0.2.999": dns.nameservers[0]:`}},
		{"bad user", "", []string{"web1", "--user", "Alice"}, exitInvalid, []string{`--user "Alice": users[0].name:`}},
		{"bad password", "", []string{"web1", "--user", "alice", "--password-hash-file", "alice.pw"}, exitInvalid,
			[]string{"--password-hash-file alice.pw: users[0].password_hash:"}},
		{"bad group", "", []string{"web1", "--user", "alice", "--groups", "adm,Bad Group"}, exitInvalid, []string{`--groups "adm,Bad Group": users[0].groups[1]:`}},
		{"bad key", "", []string{"web1", "--ssh-key", "motd"}, exitInvalid, []string{"--ssh-key motd: ssh_authorized_keys[0]:"}},
		{"root key conflict", "", []string{"web1", "--ssh-key", "alice.pub", "--root-ssh-key", "alice.pub"}, exitInvalid,
			[]string{"--root-ssh-key alice.pub: users[0].ssh_authorized_keys[0]:"}},
		{"bad file mode", "", []string{"web1", "--file", "motd:/etc/motd:999"}, exitInvalid, []string{`--file "motd:/etc/motd:999": files[0].permissions:`}},
		{"relative file dest", "", []string{"web1", "--file", "motd:etc/motd"}, exitInvalid, []string{`--file "motd:etc/motd": files[0].path:`}},
		{"bad format", "", []string{"web1", "--format", "floppy"}, exitInvalid, []string{`--format "floppy": format:`}},
		{"bad power", "", []string{"web1", "--power-state", "halt"}, exitInvalid, []string{`--power-state "halt": power_state.mode:`}},
		{"bad power delay", "", []string{"web1", "--power-state", "reboot", "--power-delay", "99999"}, exitInvalid, []string{"--power-delay: power_state.delay_minutes:"}},
		{"bad phone-home post", "", []string{"web1", "--phone-home", "https://x.example/", "--phone-home-post", "secrets"}, exitInvalid,
			[]string{`--phone-home-post "secrets": phone_home.post`}},
		{"seed too small", "", []string{"web1", "--random-seed-bytes", "3"}, exitInvalid, []string{"--random-seed-bytes 3: random_seed"}},
		{"network-config and dns", "", []string{"web1", "--network-config", "net.yaml", "--nic", "52:54:00:12:34:56,ip=dhcp", "--dns", "192.0.2.53"}, exitInvalid,
			[]string{"--dns"}},
		{"prebuilt with content", "", []string{"web1", "--prebuilt-image", "/x.iso", "--hostname", "web1"}, exitInvalid, []string{"--prebuilt-image"}},
		{"binary user-data", "", []string{"web1", "--user-data", "blob.bin"}, exitInvalid, []string{"--user-data blob.bin: user_data_base64:"}},
		{"bad user-data", "", []string{"web1", "--user-data", "motd"}, exitInvalid, []string{"--user-data motd: user_data:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errb := runJob(t, c.stdin, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, c.code, errb)
			}
			if out != "" {
				t.Errorf("a job was printed for bad flags:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(errb, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb)
				}
			}
			for _, secret := range []string{"correct horse", "root secret", "line one", "line two", testenv.HashA} {
				if strings.Contains(errb, secret) {
					t.Errorf("stderr shows a password (%q):\n%s", secret, errb)
				}
			}
		})
	}
}

// TestRunHelp: the help lists the contract's flags (the man page and the
// completions are generated from it).
func TestRunHelp(t *testing.T) {
	code, help, _ := runCLI(t, "run", "-h")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, f := range []string{"hostname", "ssh-key", "user", "password-file", "root-password-file", "timezone", "nic", "dns",
		"file", "runcmd", "user-data", "format", "wait", "attach", "detach", "print-job", "socket", "spool-dir", "timeout"} {
		if !regexp.MustCompile(`\n +--` + f + `[ =\[\n]`).MatchString(help) {
			t.Errorf("run -h lacks --%s", f)
		}
	}
	if !strings.Contains(help, "--wait=guest") {
		t.Errorf("run -h: --wait lacks the guest mode submit has")
	}
	// --wait=guest is accepted like submit's (checked here without an agent)
	if code, out, errb := runJob(t, "", "web1", "--wait=guest"); code != exitOK || !strings.Contains(out, `"domain": "web1"`) {
		t.Errorf("run --wait=guest --print-job: exit %d %s %s", code, out, errb)
	}
	if code, _, errb := runJob(t, "", "web1", "--wait=forever"); code != exitUsage || !strings.Contains(errb, "wait") {
		t.Errorf("run --wait=forever: exit %d %s", code, errb)
	}
	if !strings.Contains(help, "never from the command line") {
		t.Errorf("run -h does not say where passwords come from")
	}
}
