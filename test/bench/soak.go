package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// soakOptions configure the soak (issue 36): jobs at a steady rate through
// the spool and the socket, for a long time, while domains are undefined
// under the agent and, in the real-daemon variant, libvirtd is restarted.
type soakOptions struct {
	name     string        // variant name for the report
	uri      string        // the agent's libvirt URI
	virshURI string        // where the soak undefines domains (same state as uri)
	domType  string        // "test" or "qemu": the domain_xml of the jobs
	action   string        // the jobs' action
	duration time.Duration // submission period
	rate     float64       // jobs per second, half through the spool, half through the socket
	domains  int           // pool of domain names the jobs go to
	churn    time.Duration // every churn one domain is undefined (and a spare defined and undefined)
	restart  time.Duration // every restart libvirtd is stopped and started again (0: never)
	sample   time.Duration // sampling interval
	workers  int
	payload  string // payload directory ("": under the work directory)
	csv      string // every sample as CSV ("": none)
}

// soakSample is one sampling of the agent.
type soakSample struct {
	t                    time.Duration // since the first job
	submitted, results   int
	rss, libvirtdRSS     int64 // bytes (VmRSS)
	fds, threads         int
	goroutines           int // vmpayload_goroutines; -1 when the agent has none
	payloadEntries       int
	queue, inflight      int
	reconnects, restarts int
}

// soakResult is what the soak measured.
type soakResult struct {
	opt                         soakOptions
	submitted, viaSpool, viaAPI int
	done, failed                int
	lost, twice, unknown        int
	failCodes                   map[string]int
	firstFail                   string
	wall, drain                 time.Duration // submission period as run; from its end to the last result
	samples                     []soakSample
	undefined, spareDefined     int
	restarts                    int
	reconnects                  int
	// Per restart: whether vmpayload_libvirt_connected was seen 0 (polled
	// every 100 ms from the stop), and how long from the stop until it was
	// 1 again.
	sawDown    []bool
	backIn     []time.Duration
	apiRetries int
}

// soakDomainXML is the domain_xml of the jobs for domain name.
func soakDomainXML(domType, name string) string {
	if domType == "qemu" {
		return fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>`+
			`<os><type arch='x86_64' machine='pc'>hvm</type></os><cpu mode='custom' match='exact'><model>qemu64</model></cpu>`+
			`<devices><emulator>/usr/bin/qemu-system-x86_64</emulator><video><model type='none'/></video><memballoon model='none'/></devices></domain>`, name)
	}
	return fmt.Sprintf(`<domain type='test'><name>%s</name><memory>65536</memory><vcpu>1</vcpu>`+
		`<os><type arch='x86_64' machine='pc'>hvm</type></os><devices/></domain>`, name)
}

// soakVirsh runs virsh on uri; its output comes back with the error.
func soakVirsh(uri string, args ...string) (string, error) {
	return testenv.Virsh(context.Background(), uri, args...)
}

// inSandbox reports whether the soak runs in `test/hosts.sh sandbox`'s
// namespaces, where /run/libvirtd.pid names the private libvirtd; only
// there does it restart libvirtd.
func inSandbox() bool { return os.Getenv("VMPAYLOAD_SANDBOX") == "1" }

// restartLibvirtd stops the libvirtd of /run/libvirtd.pid (SIGTERM, then
// SIGKILL after 30 s) and starts it again with test/libvirtd.sh. Only in the
// sandbox: the pid file is the private daemon's there.
func restartLibvirtd() error {
	if !inSandbox() {
		return errors.New("refusing to restart libvirtd outside test/hosts.sh sandbox (VMPAYLOAD_SANDBOX=1)")
	}
	pid := libvirtdPID()
	if pid == 0 {
		return errors.New("no libvirtd pid in /run/libvirtd.pid")
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping libvirtd %d: %w", pid, err)
	}
	gone := func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// a zombie until its parent (init of the namespace) reaps it
		return err != nil || strings.Contains(string(b), ") Z ")
	}
	deadline := time.Now().Add(30 * time.Second)
	for !gone() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, err := exec.Command("sh", "test/libvirtd.sh").CombinedOutput()
	if err != nil {
		return fmt.Errorf("starting libvirtd: %w: %s", err, out)
	}
	return nil
}

// soak runs the soak and returns what it measured. Every job id is unique;
// the consumer reads each result from done/ or failed/ and removes it, as
// an orchestrator does, so a result written a second time shows up again
// and is counted as reported twice.
func soak(bin, work string, o soakOptions) (soakResult, error) {
	sr := soakResult{opt: o, failCodes: map[string]int{}}
	dir, err := os.MkdirTemp(work, "soak-")
	if err != nil {
		return sr, err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return sr, err
	}
	args := []string{"--workers", strconv.Itoa(o.workers), "--log-level", "info"}
	if o.payload != "" {
		args = append(args, "--payload-dir", o.payload)
	}
	a, err := startAgent(bin, o.uri, dir, args...)
	if err != nil {
		return sr, err
	}
	defer a.Stop()
	pid := a.PID()
	payloadDir := a.PayloadDir
	if o.payload != "" {
		payloadDir = o.payload
	}

	names := make([]string, o.domains)
	for i := range names {
		names[i] = fmt.Sprintf("soak-%04d", i)
	}
	// Leftovers of an earlier run (the real daemon keeps definitions).
	for _, n := range names {
		_, _ = soakVirsh(o.virshURI, "destroy", n)
		_, _ = soakVirsh(o.virshURI, "undefine", n)
	}

	var (
		mu        sync.Mutex
		submitted = map[string]string{} // id -> source
		seen      = map[string]int{}
		nResults  atomic.Int64
		nSub      atomic.Int64
		restarts  atomic.Int64
	)
	record := func(id, src string) {
		mu.Lock()
		submitted[id] = src
		mu.Unlock()
		nSub.Add(1)
	}

	// The consumer: reads and removes results.
	consume := func() {
		for _, sub := range []string{spool.Done, spool.Failed} {
			d := filepath.Join(a.SpoolDir, sub)
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				name := e.Name()
				if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".job.json") {
					continue
				}
				p := filepath.Join(d, name)
				b, err := os.ReadFile(p)
				if err != nil {
					continue
				}
				var r result.Result
				if err := json.Unmarshal(b, &r); err != nil {
					continue // being written? results are renamed into place, so not expected
				}
				os.Remove(p)
				if sub == spool.Failed {
					os.Remove(filepath.Join(d, strings.TrimSuffix(name, ".json")+".job.json"))
				}
				mu.Lock()
				_, known := submitted[r.ID]
				seen[r.ID]++
				switch {
				case !known:
					sr.unknown++
				case seen[r.ID] > 1:
					sr.twice++
				case r.State == result.StateDone:
					sr.done++
				default:
					sr.failed++
					code := "?"
					if r.Error != nil {
						code = r.Error.Code
						if sr.firstFail == "" {
							sr.firstFail = r.Error.Code + ": " + r.Error.Message
						}
					}
					sr.failCodes[code]++
				}
				mu.Unlock()
				nResults.Add(1)
			}
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bg sync.WaitGroup
	t0 := time.Now()

	// Sampler.
	var samples []soakSample
	var smu sync.Mutex
	takeSample := func() {
		s := soakSample{t: time.Since(t0), submitted: int(nSub.Load()), results: int(nResults.Load()), goroutines: -1,
			restarts: int(restarts.Load())}
		s.rss, _ = procStatus(pid, "VmRSS")
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			s.fds = len(ents)
		}
		if kb, err := agenttest.ProcStatusKB(pid, "Threads"); err == nil {
			s.threads = int(kb)
		}
		if ents, err := os.ReadDir(payloadDir); err == nil {
			s.payloadEntries = len(ents)
		}
		if lp := libvirtdPID(); lp != 0 {
			s.libvirtdRSS, _ = procStatus(lp, "VmRSS")
		}
		if v, err := metric(a, "vmpayload_goroutines"); err == nil {
			s.goroutines = int(v)
		}
		if v, err := metric(a, "vmpayload_queue_depth"); err == nil {
			s.queue = int(v)
		}
		if v, err := metric(a, "vmpayload_jobs_in_flight"); err == nil {
			s.inflight = int(v)
		}
		if v, err := metric(a, "vmpayload_libvirt_reconnects_total"); err == nil {
			s.reconnects = int(v)
		}
		smu.Lock()
		samples = append(samples, s)
		smu.Unlock()
		progress("  soak %s: %d submitted, %d results, RSS %.1f MiB, %d fds, %d goroutines, %d threads, %d payload entries, queue %d, reconnects %d",
			s.t.Truncate(time.Second), s.submitted, s.results, float64(s.rss)/(1<<20), s.fds, s.goroutines, s.threads, s.payloadEntries, s.queue, s.reconnects)
	}
	takeSample()
	every(&bg, ctx, o.sample, func(int) { takeSample() })
	bg.Add(1)
	go func() {
		defer bg.Done()
		for ctx.Err() == nil {
			consume()
			time.Sleep(500 * time.Millisecond)
		}
	}()

	// Churn: undefine one domain of the pool (the next job for it defines it
	// again through its domain_xml), and define and undefine a spare domain
	// no job names.
	genCtx, stopGen := context.WithTimeout(ctx, o.duration)
	defer stopGen()
	every(&bg, genCtx, o.churn, func(i int) {
		n := names[(i*7919)%len(names)]
		_, _ = soakVirsh(o.virshURI, "destroy", n)
		if _, err := soakVirsh(o.virshURI, "undefine", n); err == nil {
			mu.Lock()
			sr.undefined++
			mu.Unlock()
		}
		spare := fmt.Sprintf("soak-spare-%d", i%4)
		xmlPath := filepath.Join(dir, spare+".xml")
		if err := os.WriteFile(xmlPath, []byte(soakDomainXML(o.domType, spare)), 0o644); err == nil {
			if _, err := soakVirsh(o.virshURI, "define", xmlPath); err == nil {
				_, _ = soakVirsh(o.virshURI, "undefine", spare)
				mu.Lock()
				sr.spareDefined++
				mu.Unlock()
			}
		}
	})
	if o.restart > 0 {
		every(&bg, genCtx, o.restart, func(int) {
			progress("  soak: restarting libvirtd (pid %d)", libvirtdPID())
			// Watch the agent's vmpayload_libvirt_connected through the
			// restart: 0 once the daemon is gone, 1 once it is back.
			stop := time.Now()
			var down atomic.Bool
			done := make(chan struct{})
			watched := make(chan time.Duration, 1)
			go func() {
				for {
					v, err := metric(a, "vmpayload_libvirt_connected")
					if err == nil && v == 0 {
						down.Store(true)
					}
					select {
					case <-done:
						if err == nil && v == 1 {
							watched <- time.Since(stop)
							return
						}
						if time.Since(stop) > 2*time.Minute {
							watched <- -1
							return
						}
					default:
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
			err := restartLibvirtd()
			close(done)
			back := <-watched
			if err != nil {
				progress("  soak: %v", err)
				return
			}
			restarts.Add(1)
			mu.Lock()
			sr.sawDown = append(sr.sawDown, down.Load())
			sr.backIn = append(sr.backIn, back)
			mu.Unlock()
			progress("  soak: libvirtd restarted; vmpayload_libvirt_connected seen 0: %v, 1 again %s after the stop", down.Load(), back.Round(100*time.Millisecond))
		})
	}

	// Socket submitters.
	type apiJob struct {
		id   string
		body []byte
	}
	apiCh := make(chan apiJob, 1024)
	var apiRetries atomic.Int64
	var subWG sync.WaitGroup
	for w := 0; w < 4; w++ {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			c := a.Client()
			for j := range apiCh {
				for {
					rctx, rcancel := context.WithTimeout(ctx, time.Minute)
					ans, status, err := c.Submit(rctx, j.body)
					rcancel()
					if err == nil && status == http.StatusAccepted && ans.ID == j.id {
						break
					}
					if ctx.Err() != nil {
						return
					}
					apiRetries.Add(1)
					if apiRetries.Load() <= 5 {
						progress("  soak: POST %s: HTTP %d %v (retrying)", j.id, status, err)
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}

	// The generator: job k is due at t0 + k/rate.
	progress("soak %s: %s at %.0f jobs/s on %s, %d domains, churn every %s, libvirtd restart every %s (0: never)", o.name, o.duration, o.rate, o.uri, o.domains, o.churn, o.restart)
	var genErr error
	for k := 0; ; k++ {
		due := t0.Add(time.Duration(float64(k) / o.rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			select {
			case <-genCtx.Done():
			case <-time.After(d):
			}
		}
		if genCtx.Err() != nil {
			break
		}
		id := fmt.Sprintf("soak-%07d", k)
		dom := names[k%len(names)]
		j := makeJob("typical", "nocloud", dom, fmt.Sprintf("h%07d", k))
		j["id"], j["action"], j["domain_xml"] = id, o.action, soakDomainXML(o.domType, dom)
		body := jobBytes(j)
		if k%2 == 0 {
			record(id, result.SourceSpool)
			if err := a.Drop(id, body); err != nil {
				genErr = err
				break
			}
		} else {
			record(id, result.SourceSocket)
			apiCh <- apiJob{id, body}
		}
	}
	close(apiCh)
	subWG.Wait()
	sr.wall = time.Since(t0)
	stopGen()
	if genErr != nil {
		return sr, genErr
	}
	sr.apiRetries = int(apiRetries.Load())

	// Drain: every job has its result, nothing left in the spool.
	progress("soak %s: %d jobs submitted in %s; waiting for the rest of the results", o.name, nSub.Load(), sr.wall.Truncate(time.Second))
	deadline := time.Now().Add(15 * time.Minute)
	for time.Now().Before(deadline) {
		consume()
		mu.Lock()
		missing := len(submitted) - (sr.done + sr.failed)
		mu.Unlock()
		np, _ := os.ReadDir(filepath.Join(a.SpoolDir, spool.Processing))
		ni, _ := os.ReadDir(filepath.Join(a.SpoolDir, spool.Incoming))
		if missing == 0 && len(np) == 0 && len(ni) == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	sr.drain = time.Since(t0) - sr.wall
	// A second look a few seconds later: a result written twice late.
	time.Sleep(3 * time.Second)
	consume()
	takeSample()
	cancel()
	bg.Wait()

	mu.Lock()
	defer mu.Unlock()
	sr.submitted = len(submitted)
	for id, src := range submitted {
		if src == result.SourceSpool {
			sr.viaSpool++
		} else {
			sr.viaAPI++
		}
		if seen[id] == 0 {
			sr.lost++
		}
	}
	sr.samples = samples
	sr.restarts = int(restarts.Load())
	if v, err := metric(a, "vmpayload_libvirt_reconnects_total"); err == nil {
		sr.reconnects = int(v)
	}
	if o.csv != "" {
		if err := writeSoakCSV(o.csv, samples); err != nil {
			return sr, err
		}
	}
	return sr, nil
}

func writeSoakCSV(path string, ss []soakSample) error {
	var b strings.Builder
	b.WriteString("seconds,submitted,results,rss_bytes,fds,goroutines,threads,payload_entries,queue_depth,in_flight,libvirtd_rss_bytes,reconnects,restarts\n")
	for _, s := range ss {
		fmt.Fprintf(&b, "%.1f,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n", s.t.Seconds(), s.submitted, s.results, s.rss, s.fds, s.goroutines, s.threads,
			s.payloadEntries, s.queue, s.inflight, s.libvirtdRSS, s.reconnects, s.restarts)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// slope fits y = a + b·t by least squares over the samples taken in the
// second half of the submission period for which keep holds (nil: all) and
// returns b per hour, its standard error and the number of samples.
func slope(ss []soakSample, wall time.Duration, keep func(soakSample) bool, y func(soakSample) float64) (b, se float64, n int) {
	var ts, ys []float64
	for _, s := range ss {
		if s.t < wall/2 || s.t > wall || keep != nil && !keep(s) {
			continue
		}
		ts, ys = append(ts, s.t.Hours()), append(ys, y(s))
	}
	n = len(ts)
	if n < 3 {
		return math.NaN(), math.NaN(), n
	}
	var tm, ym float64
	for i := range ts {
		tm, ym = tm+ts[i], ym+ys[i]
	}
	tm, ym = tm/float64(n), ym/float64(n)
	var sxx, sxy float64
	for i := range ts {
		sxx += (ts[i] - tm) * (ts[i] - tm)
		sxy += (ts[i] - tm) * (ys[i] - ym)
	}
	if sxx == 0 {
		return math.NaN(), math.NaN(), n
	}
	b = sxy / sxx
	var res float64
	for i := range ts {
		d := ys[i] - ym - b*(ts[i]-tm)
		res += d * d
	}
	return b, math.Sqrt(res / float64(n-2) / sxx), n
}

// readSoakCSV reads the samples writeSoakCSV wrote.
func readSoakCSV(path string) ([]soakSample, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ss []soakSample
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if i == 0 {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 13 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 13", path, i+1, len(f))
		}
		v := make([]float64, len(f))
		for k := range f {
			if v[k], err = strconv.ParseFloat(f[k], 64); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
		}
		ss = append(ss, soakSample{t: time.Duration(v[0] * float64(time.Second)), submitted: int(v[1]), results: int(v[2]), rss: int64(v[3]),
			fds: int(v[4]), goroutines: int(v[5]), threads: int(v[6]), payloadEntries: int(v[7]), queue: int(v[8]), inflight: int(v[9]),
			libvirtdRSS: int64(v[10]), reconnects: int(v[11]), restarts: int(v[12])})
	}
	return ss, nil
}

func writeSoak(w io.Writer, r soakResult) {
	o := r.opt
	fmt.Fprintf(w, "#### Soak: %s\n\n", o.name)
	restart := "never"
	if o.restart > 0 {
		restart = fmt.Sprintf("every %s (%d restarts, the agent reconnected %d times)", o.restart, r.restarts, r.reconnects)
	}
	fmt.Fprintf(w, "`%s`, %d workers; `%s` jobs (the typical job, a new hostname each: a new image each) for %d domains (each job carries its `domain_xml`), "+
		"alternately through the spool and `POST /v1/jobs`, at %.0f jobs/s for %s; every %s one of the domains is destroyed and undefined under the agent (the next job defines it again) "+
		"and a spare domain no job names is defined and undefined; libvirtd restarted: %s. A consumer reads each result from `done/`/`failed/` and removes it, "+
		"so a result written twice would show up twice. Samples every %s.\n\n",
		o.uri, o.workers, o.action, o.domains, o.rate, r.wall.Truncate(time.Second), o.churn, restart, o.sample)
	codes := "–"
	if len(r.failCodes) > 0 {
		var cs []string
		for c, n := range r.failCodes {
			cs = append(cs, fmt.Sprintf("%s %d", c, n))
		}
		sort.Strings(cs)
		codes = strings.Join(cs, ", ")
	}
	fmt.Fprintf(w, "| jobs submitted (spool / socket) | duration (submission + drain) | results done / failed | **lost** | **reported twice** | results for unknown ids | failure codes | domains undefined under the agent / spares defined+undefined | API retries (503 etc.) |\n")
	fmt.Fprintf(w, "|--:|--:|--:|--:|--:|--:|---|--:|--:|\n")
	fmt.Fprintf(w, "| %d (%d / %d) | %s + %s | %d / %d | **%d** | **%d** | %d | %s | %d / %d | %d |\n\n", r.submitted, r.viaSpool, r.viaAPI,
		r.wall.Truncate(time.Second), r.drain.Truncate(time.Second), r.done, r.failed, r.lost, r.twice, r.unknown, codes, r.undefined, r.spareDefined, r.apiRetries)
	if r.firstFail != "" {
		fmt.Fprintf(w, "First failure: `%s`\n\n", r.firstFail)
	}
	if len(r.sawDown) > 0 {
		zero, never, worst := 0, 0, time.Duration(0)
		for i, d := range r.sawDown {
			if d {
				zero++
			}
			if r.backIn[i] < 0 {
				never++
			}
			worst = max(worst, r.backIn[i])
		}
		fmt.Fprintf(w, "`vmpayload_libvirt_connected`, polled every 100 ms through each restart: 0 after %d of %d stops of libvirtd, "+
			"1 again at most %s after the stop (the restart included); not 1 again within 2 minutes: %d.\n\n", zero, len(r.sawDown), worst.Round(100*time.Millisecond), never)
	}
	// About a dozen rows of the samples.
	fmt.Fprintf(w, "| time | jobs submitted | results | agent RSS | open fds | goroutines | threads | payload-directory entries | queue depth | libvirtd RSS |\n")
	fmt.Fprintf(w, "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	step := max(1, len(r.samples)/12)
	for i, s := range r.samples {
		if i%step != 0 && i != len(r.samples)-1 {
			continue
		}
		g := "–"
		if s.goroutines >= 0 {
			g = strconv.Itoa(s.goroutines)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.1f MiB | %d | %s | %d | %d | %d | %.1f MiB |\n", s.t.Truncate(time.Second), s.submitted, s.results,
			float64(s.rss)/(1<<20), s.fds, g, s.threads, s.payloadEntries, s.queue, float64(s.libvirtdRSS)/(1<<20))
	}
	fmt.Fprintln(w)
	writeSlopes(w, r.samples, r.wall)
	fmt.Fprintln(w)
}

// writeSlopes writes the slopes table of samples ss of a submission period
// of length wall.
func writeSlopes(w io.Writer, ss []soakSample, wall time.Duration) {
	type col struct {
		name, unit string
		keep       func(soakSample) bool
		y          func(soakSample) float64
	}
	rss := func(s soakSample) float64 { return float64(s.rss) / (1 << 20) }
	cols := []col{
		{"agent RSS", "MiB/h", nil, rss},
		{"agent RSS, samples with fewer than 5 jobs queued", "MiB/h", func(s soakSample) bool { return s.queue < 5 }, rss},
		{"open fds", "/h", nil, func(s soakSample) float64 { return float64(s.fds) }},
		{"goroutines", "/h", nil, func(s soakSample) float64 { return float64(s.goroutines) }},
		{"threads", "/h", nil, func(s soakSample) float64 { return float64(s.threads) }},
		{"payload-directory entries", "/h", nil, func(s soakSample) float64 { return float64(s.payloadEntries) }},
		{"libvirtd RSS", "MiB/h", nil, func(s soakSample) float64 { return float64(s.libvirtdRSS) / (1 << 20) }},
	}
	fmt.Fprintf(w, "Slopes: least squares over the samples of the second half of the submission period (%s – %s), per hour, ± the standard error of the fit:\n\n",
		(wall / 2).Truncate(time.Second), wall.Truncate(time.Second))
	fmt.Fprintf(w, "| quantity | slope | samples | mean | min – max |\n|---|--:|--:|--:|--:|\n")
	for _, c := range cols {
		if c.name == "goroutines" && len(ss) > 0 && ss[0].goroutines < 0 {
			fmt.Fprintf(w, "| %s | – (no vmpayload_goroutines) | | | |\n", c.name)
			continue
		}
		b, se, n := slope(ss, wall, c.keep, c.y)
		lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
		for _, s := range ss {
			if s.t >= wall/2 && s.t <= wall && (c.keep == nil || c.keep(s)) {
				lo, hi, sum = math.Min(lo, c.y(s)), math.Max(hi, c.y(s)), sum+c.y(s)
			}
		}
		fmt.Fprintf(w, "| %s | %+.2f ± %.2f %s | %d | %.1f | %.1f – %.1f |\n", c.name, b, se, c.unit, n, sum/float64(max(n, 1)), lo, hi)
	}
	fmt.Fprintln(w)
}

// every runs f(0), f(1), … at each tick of d until ctx ends, in a goroutine
// bg waits for.
func every(bg *sync.WaitGroup, ctx context.Context, d time.Duration, f func(i int)) {
	bg.Add(1)
	go func() {
		defer bg.Done()
		tk := time.NewTicker(d)
		defer tk.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			f(i)
		}
	}()
}
