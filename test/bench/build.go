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
	dir := filepath.Join(work, "build-"+size+"-"+format)
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return row, err
	}
	jb := jobBytes(makeJob(size, format, "", ""))
	jobPath := filepath.Join(dir, "job.json")
	if err := os.WriteFile(jobPath, jb, 0o644); err != nil {
		return row, err
	}
	// check is what `vmpayload build` does before it renders; every
	// in-process measurement includes it.
	check := func() (*payload.Checked, error) {
		_, c, rep := payload.Check(jb, payload.CheckOptions{Secrets: true, Build: true})
		if !rep.OK() {
			return nil, fmt.Errorf("%s/%s job: %w", size, format, rep.Err())
		}
		return c, nil
	}
	c, err := check()
	if err != nil {
		return row, err
	}
	// The peers get exactly the files vmpayload renders.
	r, err := payload.Render(c, payload.Options{})
	if err != nil {
		return row, err
	}
	for _, f := range r.Docs.Files {
		p := filepath.Join(src, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return row, err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return row, err
		}
	}
	label := payload.Label(job.Format(format))
	var localdsArgs []string
	if format == "nocloud" {
		localdsArgs = []string{filepath.Join(dir, "localds.iso"), filepath.Join(src, "user-data"), filepath.Join(src, "meta-data")}
		if _, err := os.Stat(filepath.Join(src, "network-config")); err == nil {
			localdsArgs = append([]string{"-N", filepath.Join(src, "network-config")}, localdsArgs...)
		}
		if _, err := os.Stat(filepath.Join(src, "vendor-data")); err == nil {
			localdsArgs = append([]string{"-V", filepath.Join(src, "vendor-data")}, localdsArgs...)
		}
	}
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
			if err := timeIt(&rec.inproc, func() error {
				c, err := check()
				if err != nil {
					return err
				}
				res, err := payload.Build(ctx, c, out, payload.Options{GID: -1, NoSync: true})
				row.imageBytes = res.Size
				return err
			}); err != nil {
				return row, err
			}
			if err := timeIt(&rec.inprocSync, func() error {
				c, err := check()
				if err != nil {
					return err
				}
				_, err = payload.Build(ctx, c, out, payload.Options{GID: -1})
				return err
			}); err != nil {
				return row, err
			}
			if err := timeIt(&rec.render, func() error {
				c, err := check()
				if err != nil {
					return err
				}
				_, err = payload.Render(c, payload.Options{})
				return err
			}); err != nil {
				return row, err
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
