package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// idleResult is what the idle benchmark measured.
type idleResult struct {
	uri              string
	window           time.Duration
	cpu, peerCPU     time.Duration // agent, libvirtd over the same window
	rss, hwm         int64
	anon, file       int64 // RssAnon (private) and RssFile (binary text, shared libraries)
	wakeups, peerPID int
}

// idle starts the agent on uri, lets it settle, and measures the CPU time it
// uses (utime+stime) and its RSS over window; libvirtd, when it runs, is
// measured over the same window as the peer.
func idle(bin, work, uri string, window time.Duration) (idleResult, error) {
	ir := idleResult{uri: uri, window: window}
	a, err := startAgent(bin, uri, filepath.Join(work, "idle"), "--log-level", "info")
	if err != nil {
		return ir, err
	}
	defer a.Stop()
	pid := a.PID()
	time.Sleep(2 * time.Second) // start-up (orphan GC, first scan) is not idle time
	if b, err := os.ReadFile("/run/libvirtd.pid"); err == nil {
		ir.peerPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	c0, err := cpuTime(pid)
	if err != nil {
		return ir, err
	}
	w0 := ctxSwitches(pid)
	var p0 time.Duration
	if ir.peerPID > 0 {
		p0, _ = cpuTime(ir.peerPID)
	}
	time.Sleep(window)
	c1, err := cpuTime(pid)
	if err != nil {
		return ir, err
	}
	ir.wakeups = ctxSwitches(pid) - w0
	if ir.peerPID > 0 {
		if p1, err := cpuTime(ir.peerPID); err == nil {
			ir.peerCPU = p1 - p0
		}
	}
	ir.cpu = c1 - c0
	if ir.rss, err = procStatus(pid, "VmRSS"); err != nil {
		return ir, err
	}
	if ir.anon, err = procStatus(pid, "RssAnon"); err != nil {
		return ir, err
	}
	if ir.file, err = procStatus(pid, "RssFile"); err != nil {
		return ir, err
	}
	ir.hwm, err = procStatus(pid, "VmHWM")
	return ir, err
}

// ctxSwitches sums the voluntary context switches of all threads of pid: a
// process that sleeps in the kernel waiting for events hardly switches.
func ctxSwitches(pid int) int {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "status"))
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
				k, _ := strconv.Atoi(strings.TrimSpace(v))
				n += k
			}
		}
	}
	return n
}
