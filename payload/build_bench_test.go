package payload_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/job/jobtest"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
)

// Benchmarks of the in-process build (test/bench compares it with
// cloud-localds and genisoimage; these are for profiling and benchstat).
// The jobs match test/bench: "typical" has a hostname, one user with a
// password hash and a key, two NICs and three files; "large" has 200 files
// of 5000 bytes.

func benchJob(b *testing.B, size, format string) *job.Job {
	b.Helper()
	j := map[string]any{"version": 1, "format": format, "hostname": "bench-01"}
	switch size {
	case "minimal":
	case "typical", "plaintext":
		u := map[string]any{"name": "alice", "ssh_authorized_keys": []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAMmjD6jou8MNNJHmnk3ekQ6Tr9SBDqVj2q8F2+//2aG alice@example"},
			"sudo": "ALL=(ALL) NOPASSWD:ALL", "groups": []string{"adm", "sudo"}, "shell": "/bin/bash",
			"password_hash": "$6$vmpayloadsalt$jf4NtEi4E.EFJTf5fEbCw99yaS5cTNBTLoIzts4NR4DwK38jC3TdvOjJQcRbU9pmb2SRvE3lUqEzlJGATqDEM1"}
		if size == "plaintext" {
			delete(u, "password_hash")
			u["password"] = "correct horse battery staple"
		}
		j["users"] = []any{u}
		j["nics"] = []any{
			map[string]any{"name": "eth0", "mac": "52:54:00:12:34:56", "mtu": 1500,
				"ipv4": map[string]any{"method": "static", "address": "192.0.2.10/24", "gateway": "192.0.2.1"}, "ipv6": map[string]any{"method": "slaac"}},
			map[string]any{"name": "eth1", "mac": "52:54:00:12:34:57", "ipv4": map[string]any{"method": "dhcp"}},
		}
		j["files"] = []any{
			map[string]any{"path": "/etc/motd", "content": "Welcome\n", "permissions": "0644"},
			map[string]any{"path": "/etc/app/app.conf", "content": strings.Repeat("key = value\n", 40), "permissions": "0640", "owner": "root:root"},
			map[string]any{"path": "/usr/local/bin/setup.sh", "content": "#!/bin/sh\necho provisioned > /var/lib/provisioned\n", "permissions": "0755"},
		}
	case "large":
		files := make([]any, 200)
		body := strings.Repeat("abcdefghij", 500)[:4999] + "\n"
		for i := range files {
			files[i] = map[string]any{"path": fmt.Sprintf("/srv/data/file-%03d.txt", i), "content": body}
		}
		j["files"] = files
	}
	return jobtest.Decoded(b, j)
}

var benchCases = []struct{ size, format string }{
	{"minimal", "nocloud"}, {"typical", "nocloud"}, {"typical", "configdrive"}, {"plaintext", "nocloud"}, {"large", "nocloud"},
}

// BenchmarkBuild is payload.Check and payload.Build (render, image, fsyncs,
// read-back) as the agent runs them.
func BenchmarkBuild(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.size+"/"+c.format, func(b *testing.B) { benchBuild(b, c.size, c.format, payload.Options{GID: -1}) })
	}
}

// BenchmarkBuildNoSync is payload.Check and payload.Build as `vmpayload
// build` runs them.
func BenchmarkBuildNoSync(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.size+"/"+c.format, func(b *testing.B) { benchBuild(b, c.size, c.format, payload.Options{GID: -1, NoSync: true}) })
	}
}

// BenchmarkRender is payload.Check and payload.Render (no image).
func BenchmarkRender(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.size+"/"+c.format, func(b *testing.B) {
			j := benchJob(b, c.size, c.format)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := payloadtest.Render(j, "", payload.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchBuild(b *testing.B, size, format string, opt payload.Options) {
	j := benchJob(b, size, format)
	out := filepath.Join(b.TempDir(), "seed.iso")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := payloadtest.Build(ctx, j, "", out, opt); err != nil {
			b.Fatal(err)
		}
	}
}
