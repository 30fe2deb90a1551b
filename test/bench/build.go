package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// buildRow is the outcome of one (size, format) case of the build benchmark.
type buildRow struct {
	size, format string
	imageBytes   int64
	// variants, measured alternately in the same loop
	inproc, inprocSync, render, proc, localds, geniso samples
}

// buildCase measures one job size and format: vmpayload in-process
// (payload.Build with and without fsync, and Render alone), `vmpayload build`
// as a process, cloud-localds (NoCloud only) and genisoimage -J -r on the
// same rendered files. Each round runs every variant once, in turn, so that
// machine noise hits them alike.
func buildCase(bin, work, size, format string, rounds int) (buildRow, error) {
	row := buildRow{size: size, format: format}
	c, err := prepareCase(work, "build", size, format)
	if err != nil {
		return row, err
	}
	dir, jobPath, src, label, localdsArgs := c.dir, c.jobPath, c.src, c.label, c.localdsArgs
	// check is what `vmpayload build` does before it renders; every
	// in-process measurement includes it.
	check := func() (*payload.Checked, error) { return checkCase(c.jobBytes, size, format) }
	ctx := context.Background()
	out := filepath.Join(dir, "inproc.iso")
	timeIt := func(s *samples, f func() error) error {
		t0 := time.Now()
		err := f()
		*s = append(*s, time.Since(t0))
		return err
	}
	run := func(name string, args ...string) func() error {
		return func() error {
			if o, err := exec.Command(name, args...).CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %w\n%s", name, err, o)
			}
			return nil
		}
	}
	// one warm-up round, not recorded
	for i := -1; i < rounds; i++ {
		var w buildRow
		rec := &row
		if i < 0 {
			rec = &w
		}
		// In-process runs are short: several per round give the
		// percentiles enough samples without lengthening the run.
		for k := 0; k < 5; k++ {
			for _, m := range []struct {
				s *samples
				f func(*payload.Checked) error
			}{
				{&rec.inproc, func(c *payload.Checked) error {
					res, err := payload.Build(ctx, c, out, payload.Options{GID: -1, NoSync: true})
					row.imageBytes = res.Size
					return err
				}},
				{&rec.inprocSync, func(c *payload.Checked) error {
					_, err := payload.Build(ctx, c, out, payload.Options{GID: -1})
					return err
				}},
				{&rec.render, func(c *payload.Checked) error {
					_, err := payload.Render(c, payload.Options{})
					return err
				}},
			} {
				if err := timeIt(m.s, func() error {
					c, err := check()
					if err != nil {
						return err
					}
					return m.f(c)
				}); err != nil {
					return row, err
				}
			}
		}
		if err := timeIt(&rec.proc, run(bin, "build", "-o", filepath.Join(dir, "proc.iso"), jobPath)); err != nil {
			return row, err
		}
		if localdsArgs != nil {
			if err := timeIt(&rec.localds, run("cloud-localds", localdsArgs...)); err != nil {
				return row, err
			}
		}
		if err := timeIt(&rec.geniso, run("genisoimage", "-quiet", "-o", filepath.Join(dir, "geniso.iso"), "-J", "-r", "-V", label, src)); err != nil {
			return row, err
		}
	}
	return row, nil
}

// benchCase is one job written out for the process benchmarks: the job
// document, the files vmpayload renders from it (the peers' input) and the
// peers' arguments.
type benchCase struct {
	dir, jobPath, src, label string
	jobBytes                 []byte   // the job document
	localdsArgs              []string // nil for config-drive
}

// prepareCase writes the job of the given size and format, and the files
// vmpayload renders from it, under work/<prefix>-<size>-<format>.
func prepareCase(work, prefix, size, format string) (benchCase, error) {
	c := benchCase{dir: filepath.Join(work, prefix+"-"+size+"-"+format)}
	c.src = filepath.Join(c.dir, "src")
	if err := os.MkdirAll(c.src, 0o755); err != nil {
		return c, err
	}
	jb := jobBytes(makeJob(size, format, "", ""))
	c.jobPath = filepath.Join(c.dir, "job.json")
	if err := os.WriteFile(c.jobPath, jb, 0o644); err != nil {
		return c, err
	}
	c.jobBytes = jb
	checked, err := checkCase(jb, size, format)
	if err != nil {
		return c, err
	}
	// The peers get exactly the files vmpayload renders.
	r, err := payload.Render(checked, payload.Options{})
	if err != nil {
		return c, err
	}
	for _, f := range r.Docs.Files {
		p := filepath.Join(c.src, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return c, err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return c, err
		}
	}
	c.label = payload.Label(job.Format(format))
	if format == "nocloud" {
		c.localdsArgs = []string{filepath.Join(c.dir, "localds.iso"), filepath.Join(c.src, "user-data"), filepath.Join(c.src, "meta-data")}
		if _, err := os.Stat(filepath.Join(c.src, "network-config")); err == nil {
			c.localdsArgs = append([]string{"-N", filepath.Join(c.src, "network-config")}, c.localdsArgs...)
		}
		if _, err := os.Stat(filepath.Join(c.src, "vendor-data")); err == nil {
			c.localdsArgs = append([]string{"-V", filepath.Join(c.src, "vendor-data")}, c.localdsArgs...)
		}
	}
	return c, nil
}

// checkCase runs the check `vmpayload build` runs on a bench job.
func checkCase(jb []byte, size, format string) (*payload.Checked, error) {
	_, c, rep := payload.Check(jb, payload.CheckOptions{Secrets: true, Build: true})
	if !rep.OK() {
		return nil, fmt.Errorf("%s/%s job: %w", size, format, rep.Err())
	}
	return c, nil
}
