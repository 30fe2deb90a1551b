package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vmpayload/vmpayload/test/agenttest"
)

// startAgent starts the agent binary on uri with its directories under dir
// and waits until its socket answers /healthz. The caller stops it.
func startAgent(bin, uri, dir string, extra ...string) (*agenttest.Agent, error) {
	a, err := agenttest.New(agenttest.Options{Bin: bin, URI: uri, Dir: dir, Args: extra})
	if err != nil {
		return nil, err
	}
	if err := a.Start(); err != nil {
		_ = a.Stop()
		return nil, err
	}
	return a, nil
}

// procStatus returns a field of /proc/PID/status in bytes (VmRSS, VmHWM).
func procStatus(pid int, field string) (int64, error) {
	kb, err := agenttest.ProcStatusKB(pid, field)
	return kb << 10, err
}

// clkTck is USER_HZ, the unit of utime and stime in /proc/PID/stat (100 on
// every Linux architecture Go supports).
const clkTck = 100

// cpuTime returns utime+stime of pid from /proc/PID/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// fields after the command name, which is in parentheses
	i := strings.LastIndexByte(string(b), ')')
	fs := strings.Fields(string(b[i+1:]))
	if len(fs) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(fs[11], 10, 64) // field 14
	st, err2 := strconv.ParseInt(fs[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * time.Second / clkTck, nil
}

// metric reads one sample value from the agent's /metrics.
func metric(a *agenttest.Agent, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return agenttest.Metric(ctx, a.Client(), name)
}
