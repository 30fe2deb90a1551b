package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
)

// agentProc is a running `vmpayload agent` process.
type agentProc struct {
	cmd                       *exec.Cmd
	dir, spool, payload, sock string
	log                       *os.File
}

// startAgent starts the agent binary on uri with its directories under dir
// and waits until its socket answers /healthz.
func startAgent(bin, uri, dir string, extra ...string) (*agentProc, error) {
	a := &agentProc{dir: dir, spool: filepath.Join(dir, "spool"), payload: filepath.Join(dir, "payload"), sock: filepath.Join(dir, "agent.sock")}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	lf, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return nil, err
	}
	a.log = lf
	args := append([]string{"agent", "--config", "", "--libvirt-uri", uri, "--spool-dir", a.spool, "--payload-dir", a.payload,
		"--socket", a.sock, "--secrets-dir", filepath.Join(dir, "secrets")}, extra...)
	a.cmd = exec.Command(bin, args...)
	a.cmd.Stdout, a.cmd.Stderr = lf, lf
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the agent: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := a.client().Get("http://agent/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return a, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.stop()
	b, _ := os.ReadFile(lf.Name())
	return nil, fmt.Errorf("the agent did not answer on %s within 60s; log:\n%s", a.sock, b)
}

func (a *agentProc) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", a.sock)
	}}}
}

// stop sends SIGTERM and waits for the process.
func (a *agentProc) stop() {
	if a.cmd.Process != nil {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = a.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = a.cmd.Process.Kill()
			<-done
		}
	}
	a.log.Close()
}

// procStatus returns a field of /proc/PID/status in bytes (VmRSS, VmHWM).
func procStatus(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			fs := strings.Fields(v)
			if len(fs) == 2 && fs[1] == "kB" {
				n, err := strconv.ParseInt(fs[0], 10, 64)
				return n << 10, err
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
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
func (a *agentProc) metric(name string) (float64, error) {
	resp, err := a.client().Get("http://agent/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("/metrics has no %s", name)
}

// readResult reads the result document of id from done/ or failed/.
func (a *agentProc) readResult(id string) (result.Result, bool) {
	for _, sub := range []string{"done", "failed"} {
		b, err := os.ReadFile(filepath.Join(a.spool, sub, id+".json"))
		if err != nil {
			continue
		}
		var r result.Result
		if json.Unmarshal(b, &r) == nil {
			return r, true
		}
	}
	return result.Result{}, false
}
