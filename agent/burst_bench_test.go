package agent_test

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/libvirtx"
)

// BenchmarkBurst runs the agent in-process on a test-driver node file with
// burstDomains stopped domains and drops one start job per domain into the
// spool at once; one op is the whole burst. It exists to profile the hot
// path (go test -bench Burst -cpuprofile/-memprofile ./agent); test/bench
// measures the real binary.
func BenchmarkBurst(b *testing.B) {
	const n = 1000
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		var node strings.Builder
		node.WriteString("<node>\n")
		for i := 0; i < n; i++ {
			s := md5.Sum([]byte(fmt.Sprint("burst-", i)))
			fmt.Fprintf(&node, `<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'><name>burst-%04d</name>`+
				`<uuid>%x-%x-%x-%x-%x</uuid><memory>65536</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os>`+
				"<devices/><test:runstate>5</test:runstate></domain>\n", i, s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
		}
		node.WriteString("</node>\n")
		nodePath := filepath.Join(dir, "node.xml")
		if err := os.WriteFile(nodePath, []byte(node.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		host, err := libvirtx.OpenHost("test://"+nodePath, libvirtx.HostOptions{Logger: log})
		if err != nil {
			b.Fatal(err)
		}
		a, err := agent.New(agent.Options{Host: host, SpoolDir: filepath.Join(dir, "spool"), PayloadDir: filepath.Join(dir, "payload"),
			Workers: 4, RescanInterval: time.Minute, ImageGID: -1, Log: log, Metrics: metrics.New()})
		if err != nil {
			b.Fatal(err)
		}
		stage := filepath.Join(dir, "stage")
		if err := os.Mkdir(stage, 0o700); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < n; i++ {
			j := map[string]any{"version": 1, "id": fmt.Sprintf("b%04d", i), "domain": fmt.Sprintf("burst-%04d", i), "action": "start",
				"hostname": fmt.Sprintf("burst-%04d", i),
				"users": []any{map[string]any{"name": "alice", "ssh_authorized_keys": []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAMmjD6jou8MNNJHmnk3ekQ6Tr9SBDqVj2q8F2+//2aG alice@example"},
					"password_hash": "$6$vmpayloadsalt$jf4NtEi4E.EFJTf5fEbCw99yaS5cTNBTLoIzts4NR4DwK38jC3TdvOjJQcRbU9pmb2SRvE3lUqEzlJGATqDEM1"}},
				"nics": []any{map[string]any{"mac": "52:54:00:12:34:56", "ipv4": map[string]any{"method": "dhcp"}},
					map[string]any{"mac": "52:54:00:12:34:57", "ipv4": map[string]any{"method": "static", "address": "192.0.2.10/24", "gateway": "192.0.2.1"}}},
				"files": []any{map[string]any{"path": "/etc/motd", "content": "hello\n"}, map[string]any{"path": "/etc/a", "content": "a\n"},
					map[string]any{"path": "/etc/b", "content": "b\n"}}}
			data, _ := json.Marshal(j)
			if err := os.WriteFile(filepath.Join(stage, fmt.Sprintf("b%04d.json", i)), data, 0o600); err != nil {
				b.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx, func() { close(ready) }) }()
		<-ready
		b.StartTimer()
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("b%04d.json", i)
			if err := os.Rename(filepath.Join(stage, name), filepath.Join(a.Spool().Dir(spool.Incoming), name)); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("b%04d", i)
			for {
				if r, ok := a.Wait(ctx, id); ok && r.State.Final() {
					if r.Error != nil {
						b.Fatalf("%s: %+v", id, r.Error)
					}
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
		b.StopTimer()
		cancel()
		<-done
		host.Close()
		b.StartTimer()
	}
}
