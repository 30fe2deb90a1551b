// Package e2e boots real Debian guests whose cloud-init payload is built,
// attached and started by the real vmpayload agent from job files dropped
// into its spool, and checks from the host what cloud-init did inside each
// guest (through the report test/guest's images print on their serial
// console).
//
// The tests run only with VMPAYLOAD_E2E=1, as root, with libvirtd and the
// guest image builder's tools installed (make test sets this up).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/guest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// resultWait bounds the wait for one job's result; jobs take seconds.
const resultWait = 5 * time.Minute

// reportWait bounds the wait for one boot's report. A TCG boot takes 70-110
// s on an idle 2-core machine, but several times that when other guests
// share the cores.
const reportWait = 20 * time.Minute

// caseWait bounds one case (up to three boots).
const caseWait = 50 * time.Minute

// defaultParallel is how many guests boot at once unless -parallel is
// given: 3 keeps a 2-core machine busy without starving the guests.
const defaultParallel = "3"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", defaultParallel)
	}
	code := m.Run()
	stopAgent()
	agenttest.RemoveBinary()
	os.Exit(code)
}

// gate skips unless VMPAYLOAD_E2E=1 and root, and makes sure libvirtd runs.
func gate(t *testing.T) {
	t.Helper()
	testenv.NeedE2E(t, "boot real guests through the agent")
	libvirtdOnce.Do(func() {
		if _, err := guest.FixKVMDevice(); err != nil {
			t.Logf("%v", err)
		}
		out, err := exec.Command("/bin/sh", testenv.RepoPath("test", "libvirtd.sh")).CombinedOutput()
		if err != nil {
			t.Logf("starting libvirtd: %v: %s", err, out)
		}
	})
	if _, err := guest.Virsh(context.Background(), guest.DefaultURI, "uri"); err != nil {
		t.Fatalf("libvirtd not answering: %v", err)
	}
}

var libvirtdOnce sync.Once

var images sync.Map // suite -> func() (*guest.Image, error)

// image builds or reuses the base image of suite once per test process.
func image(t *testing.T, suite string) *guest.Image {
	t.Helper()
	f, _ := images.LoadOrStore(suite, sync.OnceValues(func() (*guest.Image, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		start := time.Now()
		var progress bytes.Buffer
		img, err := guest.EnsureImage(ctx, suite, &progress)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w\n%s", suite, err, tail(progress.String(), 40))
		}
		slog.Info("guest image ready", "suite", suite, "dir", img.Dir, "took", time.Since(start).Round(time.Second), "cloud_init", img.Meta["CLOUD_INIT"])
		return img, nil
	}))
	img, err := f.(func() (*guest.Image, error))()
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// agentProc is the one `vmpayload agent` process all cases share, on
// qemu:///system with its own spool and payload directories.
type agentProc = agenttest.Agent

var (
	agentOnce sync.Once
	theAgent  *agentProc
	agentErr  error
)

// sharedAgent starts the agent once.
func sharedAgent(t *testing.T) *agentProc {
	t.Helper()
	agentOnce.Do(func() {
		theAgent, agentErr = newAgent()
		if agentErr == nil {
			agentErr = theAgent.Start()
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return theAgent
}

// newAgent prepares (does not start) an agent on qemu:///system whose
// directory (spool, payload dir, socket, log) is under
// /var/tmp/vmpayload-e2e, traversable by the QEMU user.
func newAgent() (*agentProc, error) {
	if err := os.MkdirAll("/var/tmp/vmpayload-e2e", 0o755); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	dir, err := os.MkdirTemp("/var/tmp/vmpayload-e2e", "agent-")
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if err := guest.MakeTraversable(dir); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return agenttest.New(agenttest.Options{URI: guest.DefaultURI, Dir: dir, Args: []string{"--rescan-interval", "1s",
		"--log-level", "debug", "--cdrom-bus", "auto", "--default-format", "nocloud"}})
}

// startOwnAgent starts an agent of t's own (newAgent), stopped when t
// ends and its directory removed unless t failed or VMPAYLOAD_E2E_KEEP is
// set.
func startOwnAgent(t *testing.T) *agentProc {
	t.Helper()
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
	return a
}

// hostReboot does to a what a host reboot does: the agent stops and the
// payload directory (a tmpfs) is empty.
func hostReboot(t *testing.T, a *agentProc) {
	t.Helper()
	_ = a.Stop()
	testenv.EmptyDir(t, a.PayloadDir)
}

// stopAgent stops the shared agent (SIGTERM) and removes its directory
// unless VMPAYLOAD_E2E_KEEP is set.
func stopAgent() {
	if theAgent == nil {
		return
	}
	_ = theAgent.Stop()
	if os.Getenv("VMPAYLOAD_E2E_KEEP") == "" {
		_ = os.RemoveAll(theAgent.Dir)
	}
}

// submit drops job into a's spool the writer's way (dot temp file, rename)
// and waits for its result document.
func submit(ctx context.Context, a *agentProc, job map[string]any) (result.Result, error) {
	id, _ := job["id"].(string)
	b, err := json.Marshal(job)
	if err != nil {
		return result.Result{}, fmt.Errorf("job %s: %w", id, err)
	}
	if err := a.Drop(id, b); err != nil {
		return result.Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, resultWait)
	defer cancel()
	return a.WaitResult(ctx, id, "")
}

// vm is one case's guest plus what the test has seen of it.
type vm struct {
	t     *testing.T
	g     *guest.Guest
	agent *agentProc
	seen  map[string]bool // boot ids of reports already consumed
	start time.Time
}

var scsiController = regexp.MustCompile(`(?s)\s*<controller type="scsi"[^>]*>\s*</controller>`)

// newVM prepares a guest (overlay, XML without a CD-ROM). For a CD-ROM on
// IDE or SATA the virtio-scsi controller is removed from the XML, so the
// agent's "auto" bus picks the machine's own bus.
func newVM(ctx context.Context, t *testing.T, suite, machine, bus string, nics []guest.NIC, cmdline string) (*vm, string) {
	t.Helper()
	return newVMFrom(ctx, t, image(t, suite), guest.Options{Machine: machine, NICs: nics, ExtraCmdline: cmdline}, bus)
}

// newVMFrom is newVM for a given image (a copy of a suite's, say) and
// guest options; the domain type is probed.
func newVMFrom(ctx context.Context, t *testing.T, img *guest.Image, opts guest.Options, bus string) (*vm, string) {
	t.Helper()
	accel, err := guest.Accel(ctx, img)
	if err != nil {
		t.Logf("KVM probe: %v (using TCG)", err)
	}
	opts.DomainType = accel
	g, err := guest.Prepare(ctx, img, opts)
	if err != nil {
		t.Fatal(err)
	}
	v := &vm{t: t, g: g, agent: sharedAgent(t), seen: map[string]bool{}}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(g.SerialLog)
			keep := filepath.Join("/var/tmp/vmpayload-e2e", "failed-"+strings.ReplaceAll(t.Name(), "/", "_")+".serial.log")
			_ = os.WriteFile(keep, b, 0o644)
			t.Logf("serial log kept at %s; tail:\n%s", keep, tail(string(b), 60))
		}
		if err := g.Cleanup(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	x, err := g.XML()
	if err != nil {
		t.Fatal(err)
	}
	if bus != guest.BusSCSI {
		x = scsiController.ReplaceAllString(x, "")
		if strings.Contains(x, `type="scsi"`) {
			t.Fatalf("could not remove the SCSI controller from:\n%s", x)
		}
	}
	return v, x
}

// run submits job for this guest and requires it to succeed.
func (v *vm) run(ctx context.Context, job map[string]any) result.Result {
	v.t.Helper()
	job["version"] = 1
	job["domain"] = v.g.Name
	if _, ok := job["id"]; !ok {
		job["id"] = fmt.Sprintf("%s-%d", v.g.Name, time.Now().UnixNano())
	}
	if v.start.IsZero() {
		v.start = time.Now()
	}
	r, err := submit(ctx, v.agent, job)
	if err != nil {
		v.t.Fatal(err)
	}
	if r.State != result.StateDone {
		b, _ := json.Marshal(r)
		v.t.Fatalf("job %s failed: %s", job["id"], b)
	}
	return r
}

// report waits for a report from a boot not seen before. It fails early
// when the domain stops without one.
func (v *vm) report(ctx context.Context) *guest.Report {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, reportWait)
	defer cancel()
	for {
		log, _ := os.ReadFile(v.g.SerialLog)
		reps, err := guest.ParseReports(log)
		if err != nil {
			v.t.Fatalf("%s: %v\n--- serial log tail ---\n%s", v.g.Name, err, tail(string(log), 60))
		}
		for _, r := range reps {
			if !v.seen[r.Meta.BootID] {
				v.seen[r.Meta.BootID] = true
				v.t.Logf("TIMING %s: report after %.1fs (guest uptime %.1fs, cloud-init %s)", v.g.Name, time.Since(v.start).Seconds(), r.Meta.UptimeSeconds, r.CloudInitVersion)
				v.start = time.Time{}
				return r
			}
		}
		if guest.KernelPanicked(log) {
			v.t.Fatalf("%s: the guest's kernel panicked before its report\n--- serial log tail ---\n%s", v.g.Name, tail(string(log), 60))
		}
		if s, err := v.g.State(ctx); err == nil && (s == "shut off" || s == "crashed") {
			log, _ = os.ReadFile(v.g.SerialLog)
			if reps, err := guest.ParseReports(log); err == nil && len(reps) > 0 && !v.seen[reps[len(reps)-1].Meta.BootID] {
				continue
			}
			v.t.Fatalf("%s stopped without a new report\n--- serial log tail ---\n%s", v.g.Name, tail(string(log), 60))
		}
		select {
		case <-ctx.Done():
			v.t.Fatalf("%s: waiting for a report: %v\n--- serial log tail ---\n%s", v.g.Name, ctx.Err(), tail(string(log), 60))
		case <-time.After(time.Second):
		}
	}
}

// shutdown waits for the guest to power itself off after its report.
func (v *vm) shutdown(ctx context.Context) {
	v.t.Helper()
	if err := v.g.WaitShutdown(ctx); err != nil {
		v.t.Fatal(err)
	}
}
