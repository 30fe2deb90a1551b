package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The job sizes of the build benchmark. A typical job carries a
// password_hash (what an orchestrator that keeps secrets out of job files
// sends); "typical-plaintext" is the same job with a plaintext password, so
// the cost of SHA-512 crypt (5000 rounds) shows up as its own row.
var sizes = []string{"minimal", "typical", "typical-plaintext", "large"}

// sshKey and passwordHash are fixed sample values (public test vectors).
const (
	sshKey       = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAMmjD6jou8MNNJHmnk3ekQ6Tr9SBDqVj2q8F2+//2aG alice@example"
	passwordHash = "$6$vmpayloadsalt$jf4NtEi4E.EFJTf5fEbCw99yaS5cTNBTLoIzts4NR4DwK38jC3TdvOjJQcRbU9pmb2SRvE3lUqEzlJGATqDEM1"
)

// makeJob returns a job document of the given size and format. domain and
// host may be empty; host makes the content (and so the image) unique.
func makeJob(size, format, domain, host string) map[string]any {
	if host == "" {
		host = "bench-01"
	}
	j := map[string]any{"version": 1, "format": format, "hostname": host}
	if domain != "" {
		j["domain"] = domain
	}
	switch size {
	case "minimal":
	case "typical", "typical-plaintext":
		u := map[string]any{"name": "alice", "ssh_authorized_keys": []string{sshKey},
			"sudo": "ALL=(ALL) NOPASSWD:ALL", "groups": []string{"adm", "sudo"}, "shell": "/bin/bash"}
		if size == "typical" {
			u["password_hash"] = passwordHash
		} else {
			u["password"] = "correct horse battery staple"
		}
		j["users"] = []any{u}
		j["nics"] = []any{
			map[string]any{"name": "eth0", "mac": "52:54:00:12:34:56", "mtu": 1500,
				"ipv4": map[string]any{"method": "static", "address": "192.0.2.10/24", "gateway": "192.0.2.1"},
				"ipv6": map[string]any{"method": "slaac"}},
			map[string]any{"name": "eth1", "mac": "52:54:00:12:34:57", "ipv4": map[string]any{"method": "dhcp"}},
		}
		j["files"] = []any{
			map[string]any{"path": "/etc/motd", "content": "Welcome to " + host + "\n", "permissions": "0644"},
			map[string]any{"path": "/etc/app/app.conf", "content": strings.Repeat("key = value\n", 40), "permissions": "0640", "owner": "root:root"},
			map[string]any{"path": "/usr/local/bin/setup.sh", "content": "#!/bin/sh\nset -e\necho provisioned > /var/lib/provisioned\n", "permissions": "0755"},
		}
	case "large":
		// 200 files, 5000 bytes each: 1 000 000 bytes of content, which
		// keeps the job document itself under the 1 MiB job limit.
		files := make([]any, 200)
		line := strings.Repeat("abcdefghij", 9) + "-bench-\n" // 98 bytes
		body := strings.Repeat(line, 52)[:4999] + "\n"
		for i := range files {
			files[i] = map[string]any{"path": fmt.Sprintf("/srv/data/file-%03d.txt", i), "content": body}
		}
		j["files"] = files
	default:
		panic("unknown job size " + size)
	}
	return j
}

// jobBytes marshals a job document.
func jobBytes(j map[string]any) []byte {
	b, err := json.Marshal(j)
	if err != nil {
		panic(err)
	}
	return b
}
