package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
)

func init() {
	register(command{name: "build", usage: "[--secrets-dir DIR] [--mode 0640] [--json] -o OUT JOB.json|-",
		summary: "render a job's cloud-init documents and write the payload image", run: runBuild})
	register(command{name: "validate", usage: "[--secrets-dir DIR] [--json] JOB.json|-",
		summary: "check a job document; prints one \"field: message\" line per problem", run: runValidate})
	register(command{name: "inspect", usage: "[--json] [--cat PATH] IMAGE",
		summary: "show a payload image's label, filesystem type and files", run: runInspect})
	register(command{name: "version", usage: "", summary: "print the version", run: func(_ command, args []string, stdout, _ io.Writer) int {
		fmt.Fprintf(stdout, "vmpayload %s\n", version)
		return exitOK
	}})
}

// readJob reads a job document, printing a read error to stderr.
func readJob(name string, stderr io.Writer) ([]byte, int) {
	data, err := readInput(name, job.MaxJobBytes)
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload: %v\n", err)
		return nil, exitUsage
	}
	return data, 0
}

func printReport(w io.Writer, errs []job.FieldError) {
	for _, fe := range errs {
		fmt.Fprintln(w, fe.String())
	}
}

func runValidate(c command, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(c, stderr)
	asJSON := fs.Bool("json", false, "print {\"valid\": bool, \"errors\": [{field, code, message}]} instead of text")
	secretsDir := fs.String("secrets-dir", "", "also check that the secrets the job names resolve in this directory, as build does")
	pos, code, ok := parseOrUsage(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	data, code := readJob(pos[0], stderr)
	if code != 0 {
		return code
	}
	_, _, rep := payload.Check(data, payload.CheckOptions{Secrets: *secretsDir != "", SecretsDir: *secretsDir})
	if *asJSON {
		out := struct {
			Valid  bool             `json:"valid"`
			Errors []job.FieldError `json:"errors"`
		}{rep.OK(), rep.Errors}
		if out.Errors == nil {
			out.Errors = []job.FieldError{}
		}
		printJSON(stdout, out)
	} else if rep.OK() {
		fmt.Fprintf(stdout, "%s: valid\n", pos[0])
	} else {
		printReport(stdout, rep.Errors)
	}
	if !rep.OK() {
		return exitInvalid
	}
	return exitOK
}

func runBuild(c command, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(c, stderr)
	out := fs.String("o", "", "output image path (required)")
	secretsDir := fs.String("secrets-dir", "", "directory where password_secret and user_data_secret names resolve")
	mode := fs.String("mode", "0640", "permission bits of the image file (octal)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, code, ok := parseOrUsage(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 || *out == "" {
		fs.Usage()
		return exitUsage
	}
	perm, err := strconv.ParseUint(*mode, 8, 32)
	if err != nil || perm > 0o777 {
		fmt.Fprintf(stderr, "vmpayload build: --mode %q is not an octal permission such as 0640\n", *mode)
		return exitUsage
	}
	data, code := readJob(pos[0], stderr)
	if code != 0 {
		return code
	}
	oneShotGC()
	_, checked, rep := payload.Check(data, payload.CheckOptions{Secrets: true, SecretsDir: *secretsDir, Build: true})
	if !rep.OK() {
		printErr(stderr, rep.Err())
		return exitInvalid
	}
	res, err := payload.Build(context.Background(), checked, *out, payload.Options{Mode: os.FileMode(perm), GID: -1})
	if err != nil {
		printErr(stderr, err)
		var ve *job.ValidationError
		if errors.As(err, &ve) {
			return exitInvalid
		}
		return exitUsage
	}
	if *asJSON {
		printJSON(stdout, res)
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: %s %s label=%s size=%d instance-id=%s sha256=%s\n",
		res.Path, res.Format, res.Media, res.Label, res.Size, res.InstanceID, res.SHA256)
	return exitOK
}

// oneShotMemoryLimit is the heap size from which a one-shot command collects
// garbage: a typical build allocates ~0.4 MB, a 1 MB job ~10 MB, the largest
// job more than this.
const oneShotMemoryLimit = 64 << 20

// oneShotGC turns the garbage collector off for a process that builds one
// image and exits, up to oneShotMemoryLimit of heap (then it collects as
// usual). For the large job the collections and their worker threads were
// ~15 % of the process's wall time; the memory is returned at exit.
func oneShotGC() {
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(oneShotMemoryLimit)
}

func printErr(w io.Writer, err error) {
	var ve *job.ValidationError
	if errors.As(err, &ve) {
		printReport(w, ve.Errors)
		return
	}
	fmt.Fprintf(w, "vmpayload: %v\n", err)
}

func runInspect(c command, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(c, stderr)
	asJSON := fs.Bool("json", false, "print the description as JSON")
	cat := fs.String("cat", "", "print the file at this path inside the image instead")
	pos, code, ok := parseOrUsage(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	if *cat != "" {
		b, err := image.ReadFile(pos[0], *cat)
		if err != nil {
			fmt.Fprintf(stderr, "vmpayload inspect: %v\n", err)
			return exitInvalid
		}
		_, _ = stdout.Write(b)
		return exitOK
	}
	info, err := image.Inspect(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload inspect: %v\n", err)
		return exitInvalid
	}
	if *asJSON {
		printJSON(stdout, info)
		return exitOK
	}
	fmt.Fprintf(stdout, "image:   %s\nlabel:   %s\nfstype:  %s\nsize:    %d\nsha256:  %s\nfiles:   %s\n", info.Path, info.Label, info.FSType, info.Size, info.SHA256, plural(len(info.Files), "file"))
	for _, f := range info.Files {
		fmt.Fprintf(stdout, "  %8d  %s\n", f.Size, f.Path)
	}
	return exitOK
}
