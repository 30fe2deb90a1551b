// Command bench measures vmpayload against the tools it replaces, in one
// run, and prints one Markdown report: payload builds (in-process, as a
// process, cloud-localds, genisoimage on the same files), process start
// (`vmpayload version` and `build` against /bin/true, cloud-localds and
// genisoimage, median and min), a 1000-job burst
// through the agent on libvirt's test driver, the idle agent, a real
// qemu:///system domain start against a plain `virsh start`, and the paths
// of the libvirt qemu hook against /bin/true; and, only when asked for
// (-sections soak, test/soak.sh), the long soak of issue 36. Variants are
// measured alternately in the same run and reported as ratios against a
// peer, because the machine is noisy. `make bench` runs it through
// test/bench.sh, which also writes the report into docs/benchmarks.md
// between the markers there.
package main

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

func main() {
	bin := flag.String("bin", "bin/vmpayload", "the vmpayload binary")
	work := flag.String("work", "", "work directory (default: a new one under /var/tmp, removed at the end)")
	doc := flag.String("doc", "", "Markdown file to put the report into, between <!-- bench:begin --> and <!-- bench:end -->")
	sections := flag.String("sections", "build,proc,burst,startup,idle,real,hook", "comma-separated sections to run")
	procRounds := flag.Int("proc-rounds", 100, "process start: rounds (each runs every command once)")
	rounds := flag.Int("rounds", 40, "build benchmark: rounds (each runs every variant; in-process variants 5 times)")
	jobs := flag.Int("jobs", 1000, "burst: number of jobs (and test-driver domains)")
	workers := flag.Int("workers", 4, "burst: agent workers")
	burstRuns := flag.Int("burst-runs", 3, "burst: runs of each layout, interleaved; the table shows each layout's median run by wall time")
	startupRounds := flag.Int("startup-rounds", 10, "start-up: rounds (each starts the agent once on each spool)")
	startupKept := flag.Int("startup-kept", 10000, "start-up: results kept in done/ of the second spool")
	startupDomains := flag.Int("startup-domains", 1000, "start-up: defined domains with a recipe (and their images) the third agent starts on")
	idleFor := flag.Duration("idle", 60*time.Second, "idle: measuring window")
	realRounds := flag.Int("real-rounds", 10, "real domain: rounds")
	hookRounds := flag.Int("hook-rounds", 100, "hook: rounds (each runs every path once)")
	burstLayouts := flag.String("burst-layouts", "tmpfs,disk,daemon", "burst: comma-separated layouts to run, in order (tmpfs: images on tmpfs; disk: all on disk; daemon: the test driver in libvirtd, run only when one is up)")
	soakDuration := flag.Duration("soak-duration", 30*time.Minute, "soak: how long jobs are submitted")
	soakRate := flag.Float64("soak-rate", 70, "soak: jobs per second (alternately spool and socket)")
	soakDomains := flag.Int("soak-domains", 200, "soak: domains the jobs go to")
	soakURI := flag.String("soak-uri", "test+unix:///default", "soak: the agent's libvirt URI; the test driver in a libvirtd, so that the soak can undefine domains the agent sees")
	soakVirshURI := flag.String("soak-virsh-uri", "", "soak: the URI the soak undefines domains on (default: -soak-uri)")
	soakAction := flag.String("soak-action", "attach", "soak: the jobs' action")
	soakChurn := flag.Duration("soak-churn", 2*time.Second, "soak: every this long one domain is undefined under the agent")
	soakRestart := flag.Duration("soak-restart", 0, "soak: restart libvirtd this often (only inside test/hosts.sh sandbox, VMPAYLOAD_SANDBOX=1; 0: never)")
	soakSample := flag.Duration("soak-sample", 10*time.Second, "soak: sampling interval")
	soakPayload := flag.String("soak-payload-dir", "", "soak: payload directory (default: under the work directory)")
	soakCSV := flag.String("soak-csv", "", "soak: write every sample to this CSV file")
	soakName := flag.String("soak-name", "", "soak: the variant's name in the report (default: from the URI)")
	soakSlopes := flag.String("soak-slopes", "", "print the slopes table of a -soak-csv file (with -soak-duration as its submission period) and exit")
	marker := flag.String("doc-marker", "bench", "the report goes between <!-- MARKER:begin --> and <!-- MARKER:end --> in -doc")
	profile := flag.String("profile", "", "burst: write the agent's CPU and allocation profiles (cpu.pprof, allocs.pprof) of the first run of the first layout into this directory")
	flag.Parse()

	if *soakSlopes != "" {
		ss, err := readSoakCSV(*soakSlopes)
		if err != nil {
			fatal(err)
		}
		writeSlopes(os.Stdout, ss, *soakDuration)
		return
	}
	if *work == "" {
		d, err := os.MkdirTemp("/var/tmp", "vmpx-bench-")
		if err != nil {
			fatal(err)
		}
		*work = d
		defer os.RemoveAll(d)
	}
	if err := os.Chmod(*work, 0o711); err != nil {
		fatal(err)
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*sections, ",") {
		want[strings.TrimSpace(s)] = true
	}
	var rep bytes.Buffer
	fmt.Fprintf(&rep, "Run %s on %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine())

	if want["build"] {
		progress("build: %d rounds per case", *rounds)
		var rows []buildRow
		for _, size := range sizes {
			for _, format := range []string{"nocloud", "configdrive"} {
				row := must(buildCase(*bin, *work, size, format, *rounds))
				progress("  %s/%s: in-process p50 %s ms", size, format, ms(row.inproc.pct(50)))
				rows = append(rows, row)
			}
		}
		writeBuild(&rep, rows)
	}
	if want["proc"] {
		progress("process start: %d rounds", *procRounds)
		writeProc(&rep, must(procBench(*bin, *work, *procRounds)))
	}
	if want["burst"] {
		layouts := must(pickLayouts(*burstLayouts, libvirtdPID() != 0))
		all := make([][]burstResult, len(layouts))
		var trash []string
		for r := 0; r < max(*burstRuns, 1); r++ {
			for k, layout := range layouts {
				progress("burst: run %d, %d jobs, %d workers, %s", r+1, *jobs, *workers, layout)
				if *profile != "" && k == 0 && r == 0 {
					if err := os.MkdirAll(*profile, 0o755); err != nil {
						fatal(err)
					}
					os.Setenv("VMPAYLOAD_PPROF_DIR", *profile)
				}
				br, err := burst(*bin, *work, *jobs, *workers, layout, &trash)
				os.Unsetenv("VMPAYLOAD_PPROF_DIR")
				if err != nil {
					fatal(err)
				}
				progress("  wall %s ms, agent CPU %s ms, file creation next to the spool %.0f µs, settled in %s ms (busy %.0f %%)", ms(br.wall), ms(br.cpu), float64(br.create)/float64(time.Microsecond), ms(br.settle), 100*br.settleBusy)
				all[k] = append(all[k], br)
			}
		}
		for _, d := range trash {
			os.RemoveAll(d)
		}
		writeBurst(&rep, all)
	}
	if want["startup"] {
		progress("start-up: %d rounds, %d kept results", *startupRounds, *startupKept)
		writeStartup(&rep, must(startup(*bin, *work, *startupKept, *startupDomains, *startupRounds)))
	}
	haveLibvirtd := exec.Command("virsh", "-q", "-c", realURI, "version").Run() == nil
	if want["idle"] {
		uri := "test:///default"
		if haveLibvirtd {
			uri = realURI
		}
		progress("idle: %s on %s", *idleFor, uri)
		writeIdle(&rep, must(idle(*bin, *work, uri, *idleFor)))
	}
	if want["real"] {
		if !haveLibvirtd {
			fmt.Fprintf(&rep, "### Real domain\n\nskipped: %s does not answer (run `bash test/libvirtd.sh`).\n\n", realURI)
		} else {
			progress("real domain: %d rounds on %s", *realRounds, realURI)
			rr, err := realDomain(*bin, *work, *realRounds)
			if err != nil {
				// keep the sections already measured
				progress("real domain: %v", err)
				fmt.Fprintf(&rep, "### Real domain\n\nfailed: `%s` (rerun with BENCH_SECTIONS=real).\n\n", strings.TrimSpace(err.Error()))
			} else {
				writeReal(&rep, rr)
			}
		}
	}
	if want["hook"] {
		progress("hook: %d rounds", *hookRounds)
		writeHook(&rep, must(hookBench(*bin, *work, *hookRounds)), *hookRounds)
	}
	if want["soak"] {
		o := soakOptions{name: *soakName, uri: *soakURI, virshURI: *soakVirshURI, domType: "test", action: *soakAction,
			duration: *soakDuration, rate: *soakRate, domains: *soakDomains, churn: *soakChurn, restart: *soakRestart,
			sample: *soakSample, workers: *workers, payload: *soakPayload, csv: *soakCSV}
		if o.virshURI == "" {
			o.virshURI = o.uri
		}
		if strings.HasPrefix(o.uri, "qemu") {
			o.domType = "qemu"
		}
		if o.name == "" {
			o.name = o.uri
		}
		sr, err := soak(*bin, *work, o)
		if err != nil {
			fatal(err)
		}
		writeSoak(&rep, sr)
	}
	os.Stdout.Write(rep.Bytes())
	if *doc != "" {
		if err := putReport(*doc, *marker, rep.Bytes()); err != nil {
			fatal(err)
		}
		progress("report written to %s", *doc)
	}
}

func progress(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }

// must returns v, or ends the program when err is not nil.
func must[T any](v T, err error) T {
	if err != nil {
		fatal(err)
	}
	return v
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "bench: %v\n", err)
	os.Exit(1)
}

// machine describes the host: cores, CPU model, kernel, Go.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel := "?"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d cores, %s, Linux %s, %s, load average %s", runtime.NumCPU(), model, kernel, runtime.Version(), loadavg())
}

// loadavg is the 1/5/15-minute load average from /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " / ")
}

// putReport replaces the text between the markers <!-- marker:begin -->
// and <!-- marker:end --> in doc with rep.
func putReport(doc, marker string, rep []byte) error {
	begin, end := "<!-- "+marker+":begin -->", "<!-- "+marker+":end -->"
	old, err := os.ReadFile(doc)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	var out string
	if i < 0 || j < i {
		out = s + "\n" + begin + "\n" + string(rep) + end + "\n"
	} else {
		out = s[:i+len(begin)] + "\n" + string(rep) + s[j:]
	}
	return os.WriteFile(doc, []byte(out), 0o644)
}

func writeBuild(w io.Writer, rows []buildRow) {
	fmt.Fprintf(w, "### Build: one payload image (ms, p50 / p99)\n\n")
	fmt.Fprintf(w, "| job | format | image | in-process | in-process + fsync | render only | `vmpayload build` | cloud-localds | genisoimage -J -r | cloud-localds ÷ in-process | genisoimage ÷ in-process | cloud-localds ÷ `vmpayload build` |\n")
	fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	pp := func(s samples) string {
		if len(s) == 0 {
			return "–"
		}
		return ms(s.pct(50)) + " / " + ms(s.pct(99))
	}
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %d KiB | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.size, r.format, r.imageBytes>>10,
			pp(r.inproc), pp(r.inprocSync), pp(r.render), pp(r.proc), pp(r.localds), pp(r.geniso),
			ratio(r.localds.pct(50), r.inproc.pct(50)), ratio(r.geniso.pct(50), r.inproc.pct(50)), ratio(r.localds.pct(50), r.proc.pct(50)))
	}
	if len(rows) > 0 {
		fmt.Fprintf(w, "\n%d in-process and %d process samples per cell; ratios are of p50s.\n\n", len(rows[0].inproc), len(rows[0].proc))
	}
}

// writeBurst writes one row per layout: the layout's median run by wall
// time (of runs[k], the runs of layout k), with the walls and losses of all
// its runs beside it.
func writeBurst(w io.Writer, runs [][]burstResult) {
	rows := make([]burstResult, len(runs))
	spread := make([]string, len(runs))
	createCol := make([]string, len(runs))
	for k, rs := range runs {
		sorted := slices.Clone(rs)
		slices.SortFunc(sorted, func(a, b burstResult) int { return cmp.Compare(a.wall, b.wall) })
		rows[k] = sorted[(len(sorted)-1)/2]
		lost := 0
		for _, b := range rs {
			lost += b.lost
		}
		spread[k] = fmt.Sprintf("%s–%s ms, %d lost", ms(sorted[0].wall), ms(sorted[len(sorted)-1].wall), lost)
		var creates []string
		for _, b := range rs {
			creates = append(creates, fmt.Sprintf("%.0f", float64(b.create)/float64(time.Microsecond)))
		}
		createCol[k] = strings.Join(creates, " / ")
	}
	b0 := rows[0]
	fmt.Fprintf(w, "### Agent burst: %d start jobs dropped at once (test driver, %d stopped domains, %d workers)\n\n", b0.jobs, b0.jobs, b0.peerWorkers)
	fmt.Fprintf(w, "Each layout ran %d times, interleaved with the others; a row is its median run by wall time (the faster middle one for an even count).\n\n", len(runs[0]))
	fmt.Fprintf(w, "| layout | wall (drop → last result) | wall of all runs | throughput | latency p50 / p99 (received → finished) | peak RSS (VmHWM) | RSS before the drop | done / failed / lost | agent CPU (user+sys) | libvirtd CPU | peer: %d × genisoimage, %d parallel: wall / CPU | peer ÷ agent: wall / CPU | file creation next to the spool before the drop, each run (µs CPU) |\n", b0.jobs, b0.peerWorkers)
	fmt.Fprintf(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for k, b := range rows {
		daemonCPU := "– (in the agent)"
		if b.daemonCPU > 0 {
			daemonCPU = ms(b.daemonCPU) + " ms"
		}
		tput := 0.0
		if b.wall > 0 {
			tput = float64(b.done+b.failed) / b.wall.Seconds()
		}
		fmt.Fprintf(w, "| %s | %s ms | %s | %.0f jobs/s | %s / %s ms | %.1f MiB | %.1f MiB | %d / %d / %d | %s ms | %s | %s / %s ms | %s / %s | %s |\n", b.layout, ms(b.wall), spread[k], tput,
			ms(b.latency.pct(50)), ms(b.latency.pct(99)), float64(b.hwm)/(1<<20), float64(b.rss0)/(1<<20), b.done, b.failed, b.lost, ms(b.cpu), daemonCPU,
			ms(b.peer), ms(b.peerCPU), ratio(b.peer, b.wall), ratio(b.peerCPU, b.cpu), createCol[k])
	}
	fmt.Fprintln(w)
	for _, rs := range runs {
		for _, b := range rs {
			if b.firstError != "" {
				fmt.Fprintf(w, "First failure (%s): `%s`\n\n", b.layout, b.firstError)
				break
			}
		}
	}
}

func writeIdle(w io.Writer, r idleResult) {
	fmt.Fprintf(w, "### Idle agent (%s, %s window)\n\n", r.uri, r.window)
	fmt.Fprintf(w, "| CPU time (utime+stime) | CPU share | voluntary context switches | RSS | of it private (RssAnon) | of it file-backed (RssFile) | peak RSS | peer: libvirtd CPU, same window |\n")
	fmt.Fprintf(w, "|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	peer := "–"
	if r.peerPID > 0 {
		peer = ms(r.peerCPU) + " ms"
	}
	fmt.Fprintf(w, "| %s ms | %.3f %% | %d | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %s |\n\n", ms(r.cpu), 100*r.cpu.Seconds()/r.window.Seconds(), r.wakeups,
		float64(r.rss)/(1<<20), float64(r.anon)/(1<<20), float64(r.file)/(1<<20), float64(r.hwm)/(1<<20), peer)
}

func writeReal(w io.Writer, r realResult) {
	fmt.Fprintf(w, "### Real domain on %s (`%s`, TCG, no disk; ms, p50 / p99)\n\n", realURI, r.domain)
	fmt.Fprintf(w, "| plain `virsh start` | job drop → running (agent) | agent ÷ virsh | payload build in the agent | payload share of the job |\n")
	fmt.Fprintf(w, "|--:|--:|--:|--:|--:|\n")
	share := 0.0
	if a := r.agent.pct(50); a > 0 {
		share = 100 * float64(r.build.pct(50)) / float64(a)
	}
	fmt.Fprintf(w, "| %s / %s | %s / %s | %s | %s / %s | %.2f %% |\n\n", ms(r.virsh.pct(50)), ms(r.virsh.pct(99)), ms(r.agent.pct(50)), ms(r.agent.pct(99)),
		ratio(r.agent.pct(50), r.virsh.pct(50)), ms(r.build.pct(50)), ms(r.build.pct(99)), share)
	fmt.Fprintf(w, "%d rounds, alternating; `virsh start` includes starting the virsh process.\n\n", len(r.agent))
}
