package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// procVariant is one command of the process-start benchmark.
type procVariant struct {
	name string
	argv []string
}

// procResult holds the process-start timings (issue 14): `vmpayload
// version` against /bin/true, and `vmpayload build` of the typical and the
// large job against cloud-localds and genisoimage -J -r on the same files.
type procResult struct {
	variants []procVariant
	samples  []samples
	cpu      []samples // user + system CPU time of each run
	loadEnd  string
	inits    initTraceResult
}

// procBench runs every variant once per round, the order rotated each
// round, so that load changes hit them alike. The process is started from
// Go with its output to /dev/null; the time is start to exit.
func procBench(bin, work string, rounds int) (procResult, error) {
	var pr procResult
	pr.variants = []procVariant{
		{"floor: `/bin/true`", []string{"/bin/true"}},
	}
	floors, err := buildFloors(work)
	if err != nil {
		return pr, fmt.Errorf("process bench: %w", err)
	}
	pr.variants = append(pr.variants, floors...)
	libs, err := buildLibFloor(work)
	if err != nil {
		return pr, fmt.Errorf("process bench: %w", err)
	}
	pr.variants = append(pr.variants, libs)
	pr.variants = append(pr.variants, procVariant{"`vmpayload version`", []string{bin, "version"}})
	for _, size := range []string{"typical", "large"} {
		c, err := prepareCase(work, "proc", size, "nocloud")
		if err != nil {
			return pr, fmt.Errorf("process bench: %w", err)
		}
		pr.variants = append(pr.variants,
			procVariant{"`vmpayload build`, " + size, []string{bin, "build", "-o", filepath.Join(c.dir, "proc.iso"), c.jobPath}},
			procVariant{"cloud-localds, " + size, append([]string{"cloud-localds"}, c.localdsArgs...)},
			procVariant{"genisoimage -J -r, " + size, []string{"genisoimage", "-quiet", "-o", filepath.Join(c.dir, "geniso.iso"), "-J", "-r", "-V", c.label, c.src}})
	}
	pr.samples = make([]samples, len(pr.variants))
	pr.cpu = make([]samples, len(pr.variants))
	n := len(pr.variants)
	for r := -1; r < rounds; r++ { // round -1 warms the page cache up, not recorded
		for k := 0; k < n; k++ {
			i := (k + max(r, 0)) % n
			v := pr.variants[i]
			cmd := exec.Command(v.argv[0], v.argv[1:]...)
			t0 := time.Now()
			err := cmd.Run()
			d := time.Since(t0)
			if err != nil {
				o, _ := exec.Command(v.argv[0], v.argv[1:]...).CombinedOutput()
				return pr, fmt.Errorf("process bench: %s: %w\n%s", strings.Join(v.argv, " "), err, o)
			}
			if r >= 0 {
				pr.samples[i] = append(pr.samples[i], d)
				pr.cpu[i] = append(pr.cpu[i], cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
			}
		}
	}
	pr.loadEnd = loadavg()
	pr.inits, err = initTrace([]string{bin, "version"}, min(max(rounds, 10), 50))
	if err != nil {
		return pr, fmt.Errorf("process bench: %w", err)
	}
	return pr, nil
}

// Names of the Go floors in the process table.
const (
	floorNoCgo = "floor: Go program, no cgo (static)"
	floorCgo   = "floor: Go program with cgo (libc, one C call)"
)

// buildFloors builds the two Go floor programs (test/bench/floor) into work:
// what any Go binary (vmpayload is one without cgo) and any cgo one (the
// daemon, vmpayloadd) costs to start and exit on this machine before it does
// any work.
func buildFloors(work string) ([]procVariant, error) {
	var vs []procVariant
	for _, f := range []struct{ name, pkg, cgo string }{
		{floorNoCgo, "./test/bench/floor/nocgo", "0"},
		{floorCgo, "./test/bench/floor/cgo", "1"},
	} {
		out := filepath.Join(work, filepath.Base(f.pkg)+"-floor")
		cmd := exec.Command("go", "build", "-trimpath", "-o", out, f.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+f.cgo)
		if o, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %w\n%s", f.pkg, err, o)
		}
		vs = append(vs, procVariant{f.name, []string{out}})
	}
	return vs, nil
}

func writeProc(w io.Writer, pr procResult) {
	fmt.Fprintf(w, "### Process start and `vmpayload build` as a process (ms)\n\n")
	fmt.Fprintf(w, "%d rounds, every command once per round in rotated order, started from Go; load average at the end: %s.\n\n", len(pr.samples[0]), pr.loadEnd)
	fmt.Fprintf(w, "| command | median | min | p90 | CPU (user + system), median |\n|---|--:|--:|--:|--:|\n")
	byName, cpuOf := map[string]samples{}, map[string]samples{}
	for i, v := range pr.variants {
		s := pr.samples[i]
		byName[v.name], cpuOf[v.name] = s, pr.cpu[i]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", v.name, ms(s.pct(50)), ms(s.pct(0)), ms(s.pct(90)), ms(pr.cpu[i].pct(50)))
	}
	both := func(a, b samples) string {
		return ratio(a.pct(50), b.pct(50)) + " / " + ratio(a.pct(0), b.pct(0))
	}
	fmt.Fprintf(w, "\n| ratio (median / min) | value | goal |\n|---|--:|---|\n")
	fmt.Fprintf(w, "| `vmpayload version` ÷ `/bin/true` | %s | `version` ≤ 3 ms |\n", both(byName["`vmpayload version`"], byName["floor: `/bin/true`"]))
	fmt.Fprintf(w, "| `vmpayload version` ÷ no-cgo floor (a Go program that prints a line) | %s | ≤ 1.5× |\n", both(byName["`vmpayload version`"], byName[floorNoCgo]))
	cpu := func(a, b string) string { return ratio(cpuOf[a].pct(50), cpuOf[b].pct(50)) }
	fmt.Fprintf(w, "| the same, CPU time (median; less sensitive to a busy machine) | %s | ≤ 1.5× |\n", cpu("`vmpayload version`", floorNoCgo))
	fmt.Fprintf(w, "| library floor ÷ no-cgo floor: what linking vmpayload's libraries costs (median / min; CPU) | %s; %s | |\n", both(byName[floorLibs], byName[floorNoCgo]), cpu(floorLibs, floorNoCgo))
	fmt.Fprintf(w, "| `vmpayload version` ÷ library floor: vmpayload's own share (median / min; CPU) | %s; %s | |\n", both(byName["`vmpayload version`"], byName[floorLibs]), cpu("`vmpayload version`", floorLibs))
	fmt.Fprintf(w, "| cloud-localds, typical ÷ cgo floor: the most any cgo binary could reach | %s | |\n", both(byName["cloud-localds, typical"], byName[floorCgo]))
	fmt.Fprintf(w, "| cloud-localds, typical ÷ no-cgo floor: the most any Go binary could reach | %s | |\n", both(byName["cloud-localds, typical"], byName[floorNoCgo]))
	for _, size := range []string{"typical", "large"} {
		build := byName["`vmpayload build`, "+size]
		goal := "≥ 8×"
		if size == "large" {
			goal = "≥ 2×"
		}
		fmt.Fprintf(w, "| cloud-localds ÷ `vmpayload build`, %s | %s | %s |\n", size, both(byName["cloud-localds, "+size], build), goal)
		fmt.Fprintf(w, "| genisoimage ÷ `vmpayload build`, %s | %s | |\n", size, both(byName["genisoimage -J -r, "+size], build))
	}
	fmt.Fprintln(w)
	writeInitTrace(w, pr.inits)
}
