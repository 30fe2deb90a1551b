package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/test/agenttest"
)

// startupResult is what the start-up benchmark measured: the time from
// launching the agent to its READY=1 (sd_notify, what systemd waits for
// with Type=notify; the socket's /healthz answers before that), with an
// empty done/ and
// with kept results in done/ (what a host keeps from every job it ran), and
// the time the guest report follower took to read those results (its own
// log line), which the agent does after it is ready.
type startupResult struct {
	uri         string
	kept        int
	empty, full samples
	load        samples
	// domains is how many test-driver domains with a recipe and their
	// image in place the third spool's agent starts on (RebuildImages
	// checks every image, CollectOrphans reads every definition), and
	// withDomains its launch → READY=1.
	domains     int
	withDomains samples
}

// followerRead is the follower's log line at the end of its reading.
var followerRead = regexp.MustCompile(`guest report follower resumed.*results_read=(\d+) duration_ms=(\d+)`)

// startup starts and stops the agent rounds times on each of two spools,
// alternating.
func startup(bin, work string, kept, domains, rounds int) (startupResult, error) {
	sr := startupResult{uri: "test:///default", kept: kept, domains: domains}
	work, err := os.MkdirTemp(work, "startup-")
	if err != nil {
		return sr, err
	}
	defer os.RemoveAll(work)
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(work, "notify.sock"), Net: "unixgram"})
	if err != nil {
		return sr, fmt.Errorf("startup: notify socket: %w", err)
	}
	defer notify.Close()
	mk := func(name, uri string, n int) (*agenttest.Agent, error) {
		a, err := agenttest.New(agenttest.Options{Bin: bin, URI: uri, Dir: filepath.Join(work, name), Args: []string{"--log-level", "info"},
			Env: []string{"NOTIFY_SOCKET=" + notify.LocalAddr().String()}})
		if err != nil {
			return nil, err
		}
		done := filepath.Join(a.SpoolDir, "done")
		if err := os.MkdirAll(done, 0o700); err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			if err := writeKeptResult(done, i); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	empty, err := mk("startup-empty", sr.uri, 0)
	if err != nil {
		return sr, err
	}
	full, err := mk("startup-full", sr.uri, kept)
	if err != nil {
		return sr, err
	}
	node := filepath.Join(work, "recipes-node.xml")
	withDomains, err := mk("startup-domains", "test://"+node, 0)
	if err != nil {
		return sr, err
	}
	if err := writeRecipeNode(bin, node, withDomains.PayloadDir, withDomains.SecretsDir, domains); err != nil {
		return sr, err
	}
	for r := 0; r < rounds; r++ {
		for _, v := range []struct {
			a   *agenttest.Agent
			out *samples
		}{{empty, &sr.empty}, {full, &sr.full}, {withDomains, &sr.withDomains}} {
			d, err := timeToReady(v.a, notify)
			if err != nil {
				return sr, err
			}
			*v.out = append(*v.out, d)
			if v.a == full {
				n, took, ok, err := waitFollowerRead(v.a, r+1)
				if err != nil {
					return sr, err
				}
				switch {
				case !ok:
					// a version that reads done/ before it is ready
				case n != kept:
					return sr, fmt.Errorf("startup: the follower read %d results, want %d", n, kept)
				default:
					sr.load = append(sr.load, took)
				}
			}
			if err := v.a.Stop(); err != nil {
				return sr, err
			}
		}
	}
	return sr, nil
}

// timeToReady launches a and waits for its READY=1 on notify.
func timeToReady(a *agenttest.Agent, notify *net.UnixConn) (time.Duration, error) {
	t0 := time.Now()
	if err := a.Launch(); err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	for {
		if err := notify.SetReadDeadline(t0.Add(agenttest.ReadyTimeout)); err != nil {
			return 0, err
		}
		n, err := notify.Read(buf)
		if err != nil {
			return 0, fmt.Errorf("startup: no READY=1 (%w):\n%s", err, a.Tail(20))
		}
		if strings.Contains(string(buf[:n]), "READY=1") {
			return time.Since(t0), nil
		}
	}
}

// waitFollowerRead waits for the follower's log line of agent start #run
// and returns what it says; ok is false when none came within 10 s (an
// older agent, measured for comparison, reads done/ before it is ready and
// logs no such line).
func waitFollowerRead(a *agenttest.Agent, run int) (n int, took time.Duration, ok bool, err error) {
	deadline := time.Now().Add(10 * time.Second)
	for a.LogCount("guest report follower resumed") < run {
		if time.Now().After(deadline) {
			return 0, 0, false, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	m := followerRead.FindAllStringSubmatch(a.Log(), -1)
	if len(m) < run {
		return 0, 0, false, fmt.Errorf("startup: unexpected follower log line:\n%s", a.Tail(20))
	}
	n, _ = strconv.Atoi(m[run-1][1])
	ms, _ := strconv.Atoi(m[run-1][2])
	return n, time.Duration(ms) * time.Millisecond, true, nil
}

// writeRecipeNode writes a test-driver node file of n stopped domains, each
// made durable by "vmpayload recipe" (its image built into payloadDir, the
// recipe and the drive in its definition), the way n start jobs leave a
// host. The recipes are sealed with the key in secretsDir (created there
// when missing), the agent's: it opens them at start-up.
func writeRecipeNode(bin, node, payloadDir, secretsDir string, n int) error {
	if err := os.MkdirAll(payloadDir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(secretsDir, 0o700); err != nil {
		return err
	}
	dir := filepath.Dir(node)
	domXML, jobFile := filepath.Join(dir, "recipe-domain.xml"), filepath.Join(dir, "recipe-job.json")
	var b strings.Builder
	b.WriteString("<node>\n")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("vmpx-start-%04d", i)
		d := fmt.Sprintf(`<domain type='test'><name>%s</name><uuid>%s</uuid><memory>65536</memory><vcpu>1</vcpu>`+
			`<os><type arch='x86_64' machine='pc'>hvm</type></os><devices/></domain>`, name, domainUUID(100000+i))
		if err := os.WriteFile(domXML, []byte(d), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(jobFile, jobBytes(makeJob("typical", "nocloud", name, name)), 0o600); err != nil {
			return err
		}
		out, err := exec.Command(bin, "recipe", "--payload-dir", payloadDir, "--secrets-dir", secretsDir, "--image-mode", "0644", "--domain-xml", domXML, jobFile).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return fmt.Errorf("startup: vmpayload recipe for %s: %w: %s", name, err, ee.Stderr)
			}
			return fmt.Errorf("startup: vmpayload recipe for %s: %w", name, err)
		}
		b.Write(out)
	}
	b.WriteString("</node>\n")
	return os.WriteFile(node, []byte(b.String()), 0o644)
}

// writeKeptResult writes the i-th result of a host's history: a done start
// job of one of 100 domains, with its payload and device, the size of a
// burst's results.
func writeKeptResult(dir string, i int) error {
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
	fin := at.Add(40 * time.Millisecond)
	id := fmt.Sprintf("kept-%06d", i)
	r := result.Result{ID: id, Domain: fmt.Sprintf("vm-%03d", i%100), DomainUUID: fmt.Sprintf("7d3c9a50-0000-4000-8000-%012d", i%100),
		Action: "start", State: result.StateDone, DomainState: "running", ReceivedAt: at, FinishedAt: &fin, DurationMS: 40,
		Payload: &result.Payload{Image: payload.Image{Path: fmt.Sprintf("/run/payload/vm-%03d-%06d.iso", i%100, i),
			SHA256: fmt.Sprintf("%064x", i), Size: 59392, Format: "nocloud", Media: "iso", Label: "cidata",
			InstanceID: fmt.Sprintf("iid-%06d", i)}},
		Device: &result.Device{Bus: "sata", Target: "sdb"}}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, id+".json"), b, 0o600)
}

func writeStartup(w io.Writer, r startupResult) {
	fmt.Fprintf(w, "### Agent start-up (%s): launch → READY=1 (ms)\n\n", r.uri)
	fmt.Fprintf(w, "| done/ | p50 | p90 | min | follower's reading of done/, after ready (p50) |\n")
	fmt.Fprintf(w, "|---|--:|--:|--:|--:|\n")
	fmt.Fprintf(w, "| empty | %s | %s | %s | – |\n", ms(r.empty.pct(50)), ms(r.empty.pct(90)), ms(r.empty.pct(1)))
	fmt.Fprintf(w, "| %d kept results | %s | %s | %s | %s |\n", r.kept, ms(r.full.pct(50)), ms(r.full.pct(90)), ms(r.full.pct(1)), ms(r.load.pct(50)))
	fmt.Fprintf(w, "| empty; %d defined domains with a recipe, images in place (test://node.xml) | %s | %s | %s | – |\n\n", r.domains, ms(r.withDomains.pct(50)), ms(r.withDomains.pct(90)), ms(r.withDomains.pct(1)))
	fmt.Fprintf(w, "%d rounds, alternating; the follower's time is its own log line (whole milliseconds). Before READY=1 the agent lists the defined domains, checks each recipe's image (RebuildImages) and removes images no domain names (CollectOrphans).\n\n", len(r.full))
}
