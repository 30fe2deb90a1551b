package cloudinit_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
)

// TestRenderSameWithoutFastYAML renders every example job, and the bench's
// typical job, with the YAML fast path and with go-yaml alone: every
// document must come out byte for byte the same.
func TestRenderSameWithoutFastYAML(t *testing.T) {
	jobs := map[string]*job.Job{}
	for _, e := range payloadtest.BuildableExamples(t, "../../../configs/examples") {
		j := e.Job
		if j.RandomSeed != nil && j.RandomSeed.GenerateBytes > 0 {
			j.RandomSeed = &job.RandomSeed{Data: "MDEyMzQ1Njc4OWFiY2RlZg=="} // a generated one differs at each render
		}
		jobs[e.Name] = j
	}
	ml := true
	jobs["typical"] = &job.Job{Version: 1, Hostname: "bench-0001", Domain: "bench-0001",
		Users: []job.User{{Name: "alice", SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAMmjD6jou8MNNJHmnk3ekQ6Tr9SBDqVj2q8F2+//2aG alice@example"},
			Sudo: "ALL=(ALL) NOPASSWD:ALL", Groups: []string{"adm", "sudo"}, Shell: "/bin/bash", LockPassword: &ml,
			PasswordHash: "$6$vmpayloadsalt$jf4NtEi4E.EFJTf5fEbCw99yaS5cTNBTLoIzts4NR4DwK38jC3TdvOjJQcRbU9pmb2SRvE3lUqEzlJGATqDEM1"}},
		NICs: []job.NIC{{Name: "eth0", MAC: "52:54:00:12:34:56", MTU: 1500, IPv4: &job.IPConfig{Method: job.MethodStatic, Address: "192.0.2.10/24", Gateway: "192.0.2.1"},
			IPv6: &job.IPConfig{Method: job.MethodSLAAC}}, {Name: "eth1", MAC: "52:54:00:12:34:57", IPv4: &job.IPConfig{Method: job.MethodDHCP}}},
		Files: []job.File{{Path: "/etc/motd", Content: "Welcome to bench-0001\n", Permissions: "0644"},
			{Path: "/etc/app/app.conf", Content: strings.Repeat("key = value\n", 40), Permissions: "0640", Owner: "root:root"},
			{Path: "/usr/local/bin/setup.sh", Content: "#!/bin/sh\nset -e\necho provisioned > /var/lib/provisioned\n", Permissions: "0755"}},
		MetaData: map[string]any{"zone": "a", "rack": map[string]any{"row": "r", "slot": 7}}}
	salt := func() (string, error) { return "fastyamlsaltsalt", nil }
	for name, j := range jobs {
		t.Run(name, func(t *testing.T) {
			render := func(fast bool) []cloudinit.File {
				defer cloudinit.SetFastYAML(cloudinit.SetFastYAML(fast))
				r, err := payloadtest.Render(j, cloudinit.SecretsDir, payload.Options{Salt: salt})
				if err != nil {
					t.Fatal(err)
				}
				return r.Docs.Files
			}
			fast, slow := render(true), render(false)
			if len(fast) != len(slow) {
				t.Fatalf("%d documents with the fast path, %d without", len(fast), len(slow))
			}
			for i := range fast {
				if fast[i].Path != slow[i].Path || !bytes.Equal(fast[i].Data, slow[i].Data) {
					t.Errorf("%s differs:\nfast path:\n%s\ngo-yaml:\n%s", slow[i].Path, fast[i].Data, slow[i].Data)
				}
			}
		})
	}
}
