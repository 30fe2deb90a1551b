package main

import (
	"crypto/md5"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// burstResult is what the burst benchmark measured.
type burstResult struct {
	layout                   string // where the images went
	jobs, done, failed, lost int
	firstError               string
	wall                     time.Duration // drop -> last finished_at
	latency                  samples       // received_at -> finished_at per job
	hwm, rss                 int64
	// rss0 is the agent's VmRSS just before the drop: started, connected,
	// the test driver (in the agent's process) holding its stopped domains.
	rss0        int64
	peer        time.Duration // the same images with genisoimage, workers in parallel
	peerWorkers int
	// cpu is the agent's utime+stime over the burst, peerCPU the
	// genisoimage processes' (user+sys): less sensitive than wall time to
	// other load on the machine.
	cpu, peerCPU time.Duration
	// daemonCPU is libvirtd's utime+stime over the burst (layoutDaemon
	// only: there the test driver's work is libvirtd's).
	daemonCPU time.Duration
	// create is the CPU one file creation took next to the spool just
	// before the drop (see createCost).
	create time.Duration
	// settle is how long the machine took to become idle before the drop
	// (see settle), and settleBusy its busy share in the last window.
	settle     time.Duration
	settleBusy float64
}

// settle flushes the dirty pages of the file systems (sync) and waits,
// at most max, until the machine is idle: a 200 ms window in which the
// CPUs were busy less than 5 % of the time. Each burst is measured as it
// comes to an idle host; without this the write-back of the run before
// it (a thousand images and results, the peer's thousand images) and the
// exit of the processes it started ran during the next drop. It returns
// the time it waited and the busy share of the last window.
func settle(max time.Duration) (time.Duration, float64) {
	t0 := time.Now()
	syscall.Sync()
	busy := 1.0
	for time.Since(t0) < max {
		b0, t0s, err := cpuStat()
		if err != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
		b1, t1s, err := cpuStat()
		if err != nil || t1s == t0s {
			break
		}
		busy = float64(b1-b0) / float64(t1s-t0s)
		if busy < 0.05 {
			break
		}
	}
	return time.Since(t0), busy
}

// cpuStat returns the machine's busy and total CPU time from /proc/stat
// (in USER_HZ ticks; idle and iowait count as not busy).
func cpuStat() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
}

// createCost creates n empty files in a new directory under dir (kept) and
// returns the CPU time of one creation: the file system's share of writing
// a result at that moment. On this VM's journal-less ext4 it ranges from
// ~15 to ~500 µs with the recent history of the directory's block group
// (inodes freed in the last minutes are skipped one by one), and each
// burst job creates one file on it, its result.
func createCost(dir string, n int) (time.Duration, error) {
	p := filepath.Join(dir, "create-probe")
	if err := os.Mkdir(p, 0o700); err != nil {
		return 0, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r0, r1 syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &r0); err != nil {
		return 0, err
	}
	for i := 0; i < n; i++ {
		fd, err := syscall.Open(filepath.Join(p, strconv.Itoa(i)), syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return 0, err
		}
		syscall.Close(fd)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &r1); err != nil {
		return 0, err
	}
	cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
	return cpu / time.Duration(n), nil
}

// domainUUID derives a stable UUID for bench domain i.
func domainUUID(i int) string {
	s := md5.Sum([]byte(fmt.Sprintf("vmpx-bench-%d", i)))
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

// nodeXML is a libvirt test-driver node file with n stopped domains.
func nodeXML(n int) string {
	var b strings.Builder
	b.WriteString("<node>\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'><name>bench-%04d</name><uuid>%s</uuid>`+
			`<memory>65536</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os><devices/>`+
			"<test:runstate>5</test:runstate></domain>\n", i, domainUUID(i))
	}
	b.WriteString("</node>\n")
	return b.String()
}

// Burst layouts: where the payload images go. The spool is always on the
// work directory's (disk) file system.
const (
	// layoutTmpfs is the installed layout: the payload directory
	// /run/payload is on the tmpfs systemd mounts at /run (here /dev/shm).
	layoutTmpfs = "images on tmpfs (as /run/payload), spool on disk"
	// layoutDisk puts the images on the disk as well.
	layoutDisk = "images and spool on disk"
	// layoutDaemon is layoutTmpfs with the test driver in libvirtd
	// (test+unix://), as in production, where the hypervisor driver's state
	// and work are libvirtd's (virtqemud's), not the agent's: in the other
	// layouts libvirt's client library runs the test driver, its 1000
	// domains and their domain XML inside the agent's process.
	layoutDaemon = "images on tmpfs, test driver in libvirtd (test+unix://), as installed"
)

// libvirtdPID returns the PID of the running libvirtd (from the pid file
// test/libvirtd.sh's `libvirtd -d` writes), or 0.
func libvirtdPID() int {
	b, err := os.ReadFile("/run/libvirtd.pid")
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return 0
	}
	return pid
}

// pickLayouts turns -burst-layouts into layout names, in the order given;
// the daemon layout is left out when no libvirtd runs.
func pickLayouts(list string, haveLibvirtd bool) ([]string, error) {
	names := map[string]string{"tmpfs": layoutTmpfs, "disk": layoutDisk, "daemon": layoutDaemon}
	var out []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		l, ok := names[n]
		if !ok {
			return nil, fmt.Errorf("-burst-layouts: unknown layout %q (tmpfs, disk, daemon)", n)
		}
		if l == layoutDaemon && !haveLibvirtd {
			progress("burst: no libvirtd running, layout %q left out (bash test/libvirtd.sh)", n)
			continue
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-burst-layouts %q: no layout to run", list)
	}
	return out, nil
}

// burst drops n typical start jobs (one per domain) into the spool of the
// agent binary running on a test-driver node file with n stopped domains,
// all at once, and waits for every result. layout says where the images
// go (layoutTmpfs, layoutDisk, layoutDaemon); the peer writes its images there too.
//
// The run's directory on disk is not removed but added to *trash, for the
// caller to remove once every run is done: on a journal-less ext4 (as here)
// the kernel skips inodes freed in the last minutes when it allocates new
// ones, scanning past each of them, so removing a run's few thousand files
// made the file creations of the next runs (the agent's results) cost up to
// ten times more than after a quiet minute. A burst is measured as it comes
// to an idle host.
func burst(bin, work string, n, workers int, layout string, trash *[]string) (burstResult, error) {
	br := burstResult{jobs: n, layout: layout}
	dir, err := os.MkdirTemp(work, "burst-")
	if err != nil {
		return br, err
	}
	*trash = append(*trash, dir)
	if err := os.Chmod(dir, 0o711); err != nil {
		return br, err
	}
	node := filepath.Join(dir, "node.xml")
	if err := os.WriteFile(node, []byte(nodeXML(n)), 0o644); err != nil {
		return br, err
	}
	args := []string{"--workers", fmt.Sprint(workers), "--log-level", "info"}
	imgDir := filepath.Join(dir, "payload")
	uri := "test://" + node
	var daemon int
	if layout == layoutDaemon {
		if daemon = libvirtdPID(); daemon == 0 {
			return br, fmt.Errorf("burst: %s: no libvirtd running (bash test/libvirtd.sh)", layout)
		}
		uri = "test+unix://" + node
	}
	if layout == layoutTmpfs || layout == layoutDaemon {
		tmp, err := os.MkdirTemp(shmDir, "vmpayload-burst-")
		if err != nil {
			return br, fmt.Errorf("burst: payload directory on tmpfs: %w", err)
		}
		defer os.RemoveAll(tmp)
		imgDir = filepath.Join(tmp, "payload")
		args = append(args, "--payload-dir", imgDir)
	}
	a, err := startAgent(bin, uri, dir, args...)
	if err != nil {
		return br, err
	}
	defer a.Stop()

	// Stage the files next to the spool (same file system), then rename
	// them into incoming/ back to back: "dropped at once".
	stage := filepath.Join(dir, "stage")
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return br, err
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("burst-%04d", i)
		j := makeJob("typical", "nocloud", fmt.Sprintf("bench-%04d", i), fmt.Sprintf("bench-%04d", i))
		j["id"], j["action"] = ids[i], "start"
		if err := os.WriteFile(filepath.Join(stage, ids[i]+".json"), jobBytes(j), 0o600); err != nil {
			return br, err
		}
	}
	incoming := filepath.Join(a.SpoolDir, "incoming")
	br.settle, br.settleBusy = settle(10 * time.Second)
	if br.create, err = createCost(filepath.Dir(a.SpoolDir), 200); err != nil {
		return br, fmt.Errorf("burst: file creation probe: %w", err)
	}
	if br.rss0, err = procStatus(a.PID(), "VmRSS"); err != nil {
		return br, err
	}
	cpu0, err := cpuTime(a.PID())
	if err != nil {
		return br, err
	}
	var dcpu0 time.Duration
	if daemon != 0 {
		if dcpu0, err = cpuTime(daemon); err != nil {
			return br, err
		}
	}
	t0 := time.Now()
	for _, id := range ids {
		if err := os.Rename(filepath.Join(stage, id+".json"), filepath.Join(incoming, id+".json")); err != nil {
			return br, err
		}
	}
	// Wait until every job has its result and left processing/.
	deadline := time.Now().Add(10 * time.Minute)
	for {
		nd, _ := os.ReadDir(filepath.Join(a.SpoolDir, "done"))
		nf, _ := os.ReadDir(filepath.Join(a.SpoolDir, "failed"))
		np, _ := os.ReadDir(filepath.Join(a.SpoolDir, "processing"))
		ni, _ := os.ReadDir(incoming)
		results := countResults(nd) + countResults(nf)
		if results >= n && len(np) == 0 && len(ni) == 0 {
			break
		}
		if time.Now().After(deadline) {
			break // counted as lost below
		}
		// Wall time comes from the results' finished_at, not from this
		// loop, so it polls slowly: listing three directories of up to
		// 1000 entries every few ms took a fifth of a core from the agent
		// on a 2-core machine.
		time.Sleep(100 * time.Millisecond)
	}
	cpu1, err := cpuTime(a.PID())
	if err != nil {
		return br, err
	}
	br.cpu = cpu1 - cpu0
	if daemon != 0 {
		dcpu1, err := cpuTime(daemon)
		if err != nil {
			return br, err
		}
		br.daemonCPU = dcpu1 - dcpu0
	}
	if br.hwm, err = procStatus(a.PID(), "VmHWM"); err != nil {
		return br, err
	}
	if br.rss, err = procStatus(a.PID(), "VmRSS"); err != nil {
		return br, err
	}
	var last time.Time
	for _, id := range ids {
		r, _, ok := a.ReadResult(id)
		if !ok || r.FinishedAt == nil {
			br.lost++
			continue
		}
		if r.Error != nil {
			br.failed++
			if br.firstError == "" {
				br.firstError = r.Error.Code + ": " + r.Error.Message
			}
		} else {
			br.done++
		}
		if r.FinishedAt.After(last) {
			last = *r.FinishedAt
		}
		br.latency = append(br.latency, r.FinishedAt.Sub(r.ReceivedAt))
	}
	br.wall = last.Sub(t0)

	// The peer: the same 1000 images built with genisoimage, as many in
	// parallel as the agent has workers (what a forking orchestrator does).
	// Only the image build is counted; no libvirt work at all.
	src := filepath.Join(dir, "peer-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return br, err
	}
	imgs, _ := filepath.Glob(filepath.Join(imgDir, "*.iso"))
	if len(imgs) == 0 {
		return br, fmt.Errorf("burst: no images in %s", imgDir)
	}
	// Extract one image's files as the peer's input: all jobs are the same size.
	for _, name := range []string{"user-data", "meta-data", "network-config"} {
		out, err := exec.Command(bin, "inspect", "--cat", name, imgs[0]).Output()
		if err != nil {
			return br, fmt.Errorf("inspect --cat %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(src, name), out, 0o644); err != nil {
			return br, err
		}
	}
	br.peerWorkers = workers
	var next atomic.Int64
	var wg sync.WaitGroup
	var peerErr atomic.Value
	var peerCPU atomic.Int64
	p0 := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				out := filepath.Join(filepath.Dir(imgs[0]), fmt.Sprintf("peer-%d.iso", w))
				cmd := exec.Command("genisoimage", "-quiet", "-o", out, "-J", "-r", "-V", "cidata", src)
				if o, err := cmd.CombinedOutput(); err != nil {
					peerErr.Store(fmt.Errorf("genisoimage: %w: %s", err, o))
					return
				}
				peerCPU.Add(int64(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()))
			}
		}()
	}
	wg.Wait()
	br.peer = time.Since(p0)
	br.peerCPU = time.Duration(peerCPU.Load())
	if e, ok := peerErr.Load().(error); ok {
		return br, e
	}
	return br, nil
}

// shmDir is the tmpfs the tmpfs layout puts its images on.
const shmDir = "/dev/shm"

func countResults(ents []os.DirEntry) int {
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") && !strings.HasSuffix(e.Name(), ".job.json") && !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}
