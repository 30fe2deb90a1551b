package main

import (
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// hookDomain is the domain the hook bench starts (test/bench-hook.sh
// reads the same file).
//
//go:embed hook-domain.xml
var hookDomain string

// hookResult holds the timings of the libvirt qemu hook's paths.
type hookResult struct {
	imageSize int64
	names     []string
	samples   []samples
}

// hookVariant is one way of running the hook.
type hookVariant struct {
	name  string
	argv  []string
	stdin string // file fed on stdin, "" for /dev/null
	prep  func() error
}

// hookBench runs the packaged hook script (packaging/libvirt/qemu-hook.sh,
// pointed at bin) and the binary on its paths, alternately, rounds times:
// the no-op path (stopped end), prepare begin on a domain without a recipe,
// with an intact image and with the image deleted (rebuild), with /bin/true
// as the floor.
func hookBench(bin, work string, rounds int) (hookResult, error) {
	var hr hookResult
	dir := filepath.Join(work, "hook")
	payloadDir, secretsDir := filepath.Join(dir, "payload"), filepath.Join(dir, "secrets")
	for _, d := range []string{payloadDir, secretsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return hr, fmt.Errorf("hook bench: %w", err)
		}
	}
	absBin, err := filepath.Abs(bin)
	if err != nil {
		return hr, fmt.Errorf("hook bench: %w", err)
	}
	cfg := filepath.Join(dir, "agent.yaml")
	files := map[string]string{
		cfg:                           fmt.Sprintf("payload_dir: %s\nsecrets_dir: %s\n", payloadDir, secretsDir),
		filepath.Join(dir, "dom.xml"): hookDomain,
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			return hr, fmt.Errorf("hook bench: %w", err)
		}
	}
	script, err := os.ReadFile("packaging/libvirt/qemu-hook.sh")
	if err != nil {
		return hr, fmt.Errorf("hook bench: reading the hook script: %w", err)
	}
	hook := filepath.Join(dir, "hook")
	s := strings.Replace(string(script), "exec /usr/bin/vmpayload hook", "exec /usr/bin/env VMPAYLOAD_CONFIG="+cfg+" "+absBin+" hook", 1)
	if err := os.WriteFile(hook, []byte(s), 0o755); err != nil {
		return hr, fmt.Errorf("hook bench: %w", err)
	}
	// a typical job: the full NoCloud example
	full := filepath.Join(dir, "full.xml")
	out, err := exec.Command(absBin, "recipe", "--payload-dir", payloadDir, "--secrets-dir", secretsDir,
		"--domain-xml", filepath.Join(dir, "dom.xml"), "configs/examples/02-full-nocloud.json").Output()
	if err != nil {
		return hr, fmt.Errorf("hook bench: vmpayload recipe: %w", err)
	}
	if err := os.WriteFile(full, out, 0o644); err != nil {
		return hr, fmt.Errorf("hook bench: %w", err)
	}
	imgs, _ := filepath.Glob(filepath.Join(payloadDir, "*.iso"))
	if len(imgs) != 1 {
		return hr, fmt.Errorf("hook bench: want one image in %s, found %d", payloadDir, len(imgs))
	}
	img := imgs[0]
	if st, err := os.Stat(img); err == nil {
		hr.imageSize = st.Size()
	}

	variants := []hookVariant{
		{name: "floor: `/bin/true`", argv: []string{"/bin/true"}},
		{name: "script, no-op (`stopped end`, domain XML on stdin)", argv: []string{hook, "bench", "stopped", "end", "-"}, stdin: full},
		{name: "binary, no-op (`vmpayload hook … stopped end` directly)", argv: []string{absBin, "hook", "--config", cfg, "bench", "stopped", "end", "-"}},
		{name: "script, `prepare begin`, no recipe", argv: []string{hook, "bench", "prepare", "begin", "-"}, stdin: filepath.Join(dir, "dom.xml")},
		{name: "script, `prepare begin`, intact image", argv: []string{hook, "bench", "prepare", "begin", "-"}, stdin: full},
		{name: "script, `prepare begin`, image missing (rebuild)", argv: []string{hook, "bench", "prepare", "begin", "-"}, stdin: full,
			prep: func() error { return os.Remove(img) }},
	}
	hr.samples = make([]samples, len(variants))
	for _, v := range variants {
		hr.names = append(hr.names, v.name)
	}
	for r := -2; r < rounds; r++ { // two warm-up rounds
		for i, v := range variants {
			if v.prep != nil {
				if err := v.prep(); err != nil {
					return hr, fmt.Errorf("hook bench: %s: %w", v.name, err)
				}
			}
			d, err := timeRun(v.argv, v.stdin)
			if err != nil {
				return hr, fmt.Errorf("hook bench: %s: %w", v.name, err)
			}
			if r >= 0 {
				hr.samples[i] = append(hr.samples[i], d)
			}
		}
	}
	return hr, nil
}

// timeRun runs argv with stdin from a file (or /dev/null) and returns its
// wall time; a non-zero exit is an error.
func timeRun(argv []string, stdin string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	cmd.Stdout = io.Discard
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		return d, fmt.Errorf("%w: %s", err, strings.TrimSpace(errb.String()))
	}
	return d, nil
}

func writeHook(w io.Writer, r hookResult, rounds int) {
	fmt.Fprintf(w, "### libvirt qemu hook\n\n%d rounds, variants alternating; a %d-byte ISO from "+
		"`configs/examples/02-full-nocloud.json`; wall time of the process started from Go. `vmpayload hook` "+
		"is in the pure-Go binary (no cgo, no libvirt: issue 33); goal: `prepare begin` without work ≤ 2 ms above `/bin/true`. "+
		"Load average at the end: %s.\n\n", rounds, r.imageSize, loadavg())
	fmt.Fprintf(w, "| path | p50 ms | p90 ms | min ms | p50 vs `/bin/true` | p50 − `/bin/true` ms |\n|---|---:|---:|---:|---:|---:|\n")
	for i, name := range r.names {
		s := r.samples[i]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", name, ms(s.pct(50)), ms(s.pct(90)), ms(s.pct(0.0001)),
			ratio(s.pct(50), r.samples[0].pct(50)), ms(s.pct(50)-r.samples[0].pct(50)))
	}
	fmt.Fprintln(w)
}
