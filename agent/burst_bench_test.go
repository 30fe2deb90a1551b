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
		host, a, run := burstAgent(b, dir, burstNode(n))
		ready, stop := run()
		<-ready
		b.StartTimer()
		burstDrop(b, a, dir, n)
		b.StopTimer()
		stop()
		host.Close()
		b.StartTimer()
	}
}

// BenchmarkStartupRecipes measures the agent's start-up on a host whose
// 1000 domains each carry a recipe and have their payload image in place
// (the definitions a burst left): one op is agent.Run from its call to
// ready, which is when systemd learns the agent is up (READY=1). The
// start-up reads every definition, checks every image against its recipe
// (RebuildImages) and removes images no domain names (CollectOrphans).
func BenchmarkStartupRecipes(b *testing.B) {
	const n = 1000
	dir := b.TempDir()
	host, a, run := burstAgent(b, dir, burstNode(n))
	ready, stop := run()
	<-ready
	burstDrop(b, a, dir, n)
	doms, err := host.ListDomains(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	stop()
	host.Close()
	var node strings.Builder
	node.WriteString("<node>\n")
	withRecipe := 0
	for _, d := range doms {
		if strings.Contains(d.InactiveXML, "vmpayload:recipe") {
			withRecipe++
		}
		node.WriteString(d.InactiveXML)
		node.WriteString("\n")
	}
	node.WriteString("</node>\n")
	if withRecipe != n {
		b.Fatalf("%d of %d definitions carry a recipe", withRecipe, n)
	}
	for b.Loop() {
		b.StopTimer()
		host, _, run := burstAgent(b, dir, node.String())
		b.StartTimer()
		ready, stop := run()
		<-ready
		b.StopTimer()
		stop()
		host.Close()
		b.StartTimer()
	}
}

// burstNode returns a test-driver node document with n stopped domains,
// burst-0000 and on.
func burstNode(n int) string {
	var node strings.Builder
	node.WriteString("<node>\n")
	for i := 0; i < n; i++ {
		s := md5.Sum([]byte(fmt.Sprint("burst-", i)))
		fmt.Fprintf(&node, `<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'><name>burst-%04d</name>`+
			`<uuid>%x-%x-%x-%x-%x</uuid><memory>65536</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os>`+
			"<devices/><test:runstate>5</test:runstate></domain>\n", i, s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
	}
	node.WriteString("</node>\n")
	return node.String()
}

// burstAgent opens the test driver on node (written into dir) and makes an
// agent with its spool and payload directory in dir. run starts it: ready
// is closed once it is ready, and stop stops it and waits for its end.
func burstAgent(b *testing.B, dir, node string) (host *libvirtx.LibvirtHost, a *agent.Agent, run func() (ready <-chan struct{}, stop func())) {
	b.Helper()
	nodePath := filepath.Join(dir, "node.xml")
	if err := os.WriteFile(nodePath, []byte(node), 0o644); err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	host, err := libvirtx.OpenHost("test://"+nodePath, libvirtx.HostOptions{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	// The recipe key lives in the secrets directory (recipes are sealed).
	secrets := filepath.Join(dir, "secrets")
	if err := os.MkdirAll(secrets, 0o700); err != nil {
		b.Fatal(err)
	}
	a, err = agent.New(agent.Options{Host: host, SpoolDir: filepath.Join(dir, "spool"), PayloadDir: filepath.Join(dir, "payload"),
		SecretsDir: secrets, Workers: 4, RescanInterval: time.Minute, ImageGID: -1, Log: log, Metrics: metrics.New()})
	if err != nil {
		b.Fatal(err)
	}
	return host, a, func() (<-chan struct{}, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx, func() { close(ready) }) }()
		return ready, func() {
			cancel()
			if err := <-done; err != nil {
				b.Error(err)
			}
		}
	}
}

// burstDrop stages one start job per domain (untimed), renames them all
// into incoming/ and waits for every result; it fails b on a failed job.
func burstDrop(b *testing.B, a *agent.Agent, dir string, n int) {
	b.Helper()
	b.StopTimer()
	stage := filepath.Join(dir, "stage")
	if err := os.MkdirAll(stage, 0o700); err != nil {
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
	ctx := context.Background()
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
}
