package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{Use: "version", Short: "print the version", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "vmpayload %s\n", version)
			return nil
		}}
}

func newValidateCmd() *cobra.Command {
	var o validateOptions
	cmd := command("validate JOB.json|-", "check a job document; prints one \"field: message\" line per problem", 1, 1, cobra.FixedCompletions([]string{"json"}, cobra.ShellCompDirectiveFilterFileExt),
		func(args []string, stdout, stderr io.Writer) int { return runValidate(o, args[0], stdout, stderr) })
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print {\"valid\": bool, \"errors\": [{field, code, message}]} instead of text")
	cmd.Flags().StringVar(&o.secretsDir, "secrets-dir", "", "also check that the secrets the job names resolve in this `DIR`, as build does")
	_ = cmd.MarkFlagDirname("secrets-dir")
	return cmd
}

// validateOptions are the flags of validate.
type validateOptions struct {
	asJSON     bool
	secretsDir string
}

func newBuildCmd() *cobra.Command {
	var o buildOptions
	var cmd *cobra.Command
	cmd = command("build -o OUT JOB.json|-", "render a job's cloud-init documents and write the payload image", 1, 1, cobra.FixedCompletions([]string{"json"}, cobra.ShellCompDirectiveFilterFileExt),
		func(args []string, stdout, stderr io.Writer) int {
			if o.out == "" {
				_ = usageError(cmd)
				return exitUsage
			}
			return runBuild(o, args[0], stdout, stderr)
		})
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "output image `PATH` (required); for format \"credentials\" the directory the fw_cfg files go into")
	cmd.Flags().StringVar(&o.secretsDir, "secrets-dir", "", "`DIR` where password_secret and user_data_secret names resolve")
	cmd.Flags().StringVar(&o.mode, "mode", "0640", "permission bits of the image file (octal)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the result as JSON")
	_ = cmd.MarkFlagDirname("secrets-dir")
	return cmd
}

// buildOptions are the flags of build.
type buildOptions struct {
	out, secretsDir, mode string
	asJSON                bool
}

func newInspectCmd() *cobra.Command {
	var asJSON bool
	var cat string
	cmd := command("inspect IMAGE", "show a payload image's label, filesystem type and files", 1, 1, cobra.FixedCompletions([]string{"iso", "img"}, cobra.ShellCompDirectiveFilterFileExt),
		func(args []string, stdout, stderr io.Writer) int {
			return runInspect(args[0], asJSON, cat, stdout, stderr)
		})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the description as JSON")
	cmd.Flags().StringVar(&cat, "cat", "", "print the file at this `PATH` inside the image instead")
	return cmd
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

func runValidate(o validateOptions, name string, stdout, stderr io.Writer) int {
	data, code := readJob(name, stderr)
	if code != 0 {
		return code
	}
	_, _, rep := payload.Check(data, payload.CheckOptions{Secrets: o.secretsDir != "", SecretsDir: o.secretsDir})
	if o.asJSON {
		out := struct {
			Valid  bool             `json:"valid"`
			Errors []job.FieldError `json:"errors"`
		}{rep.OK(), rep.Errors}
		if out.Errors == nil {
			out.Errors = []job.FieldError{}
		}
		printJSON(stdout, out)
	} else if rep.OK() {
		fmt.Fprintf(stdout, "%s: valid\n", name)
	} else {
		printReport(stdout, rep.Errors)
	}
	if !rep.OK() {
		return exitInvalid
	}
	return exitOK
}

func runBuild(o buildOptions, name string, stdout, stderr io.Writer) int {
	perm, err := parseMode("mode", o.mode)
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload build: %v\n", err)
		return exitUsage
	}
	data, code := readJob(name, stderr)
	if code != 0 {
		return code
	}
	oneShotGC()
	written, checked, rep := payload.Check(data, payload.CheckOptions{Secrets: true, SecretsDir: o.secretsDir, Build: true})
	if !rep.OK() {
		return printErr(stderr, rep.Err())
	}
	if written != nil && kinds.Chooses(written.Format) == kinds.ChooseMedium && written.SysprepMedium == "" && written.Media == "" {
		// the agent picks the medium by the domain's machine; without a
		// domain the floppy stays the default: say so (on stderr, which
		// keeps --json's output a document)
		fmt.Fprintln(stderr, `vmpayload build: sysprep_medium not given: building a floppy, the default without a domain (the agent gives a domain whose machine has no floppy controller a CD-ROM); set sysprep_medium "floppy" or "cdrom" to choose`)
	}
	if rd, err := payload.Render(checked, payload.Options{}); err == nil && rd.Shape() != payload.ShapeImage {
		// named values (systemd credentials): a file per value, or none
		return buildValues(o, rd, stdout, stderr)
	}
	res, err := payload.Build(context.Background(), checked, o.out, payload.Options{Mode: perm, GID: -1})
	if err != nil {
		return printErr(stderr, err)
	}
	if o.asJSON {
		printJSON(stdout, res)
		return exitOK
	}
	if line, ok := ignitionBuildLine(res); ok { // ignition.go
		fmt.Fprintln(stdout, line)
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: %s %s label=%s size=%d instance-id=%s sha256=%s\n",
		res.Path, res.Format, res.Media, res.Label, res.Size, res.InstanceID, res.SHA256)
	return exitOK
}

// parseMode reads the octal permission bits s that the flag name gives.
func parseMode(name, s string) (os.FileMode, error) {
	perm, err := strconv.ParseUint(s, 8, 32)
	if err != nil || perm > 0o777 {
		return 0, fmt.Errorf("--%s %q is not an octal permission such as 0640", name, s)
	}
	return os.FileMode(perm), nil
}

// oneShotMemoryLimit is the heap size from which a one-shot command collects
// garbage: a typical build allocates ~0.4 MB, a 1 MB job ~10 MB, the largest
// job more than this.
const oneShotMemoryLimit = 64 << 20

// oneShotGC turns the garbage collector off for a process that builds one
// image and exits, up to oneShotMemoryLimit of heap (then it collects as
// usual). For the large job the collections and their worker threads were
// ~15 % of the process's wall time; the memory is returned at exit. Kept
// (issue 33): the 1 MB job, 100 alternated runs, median 39.0 ms with and
// 41.8 ms without (~7 %); the typical job shows no difference.
func oneShotGC() {
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(oneShotMemoryLimit)
}

// printErr prints err (a ValidationError as its report) and returns its exit
// code: exitInvalid for a ValidationError, else exitUsage.
func printErr(w io.Writer, err error) int {
	var ve *job.ValidationError
	if errors.As(err, &ve) {
		printReport(w, ve.Errors)
		return exitInvalid
	}
	fmt.Fprintf(w, "vmpayload: %v\n", err)
	return exitUsage
}

func runInspect(path string, asJSON bool, cat string, stdout, stderr io.Writer) int {
	if cat != "" {
		b, err := image.ReadFile(path, cat)
		if err != nil {
			fmt.Fprintf(stderr, "vmpayload inspect: %v\n", err)
			return exitInvalid
		}
		_, _ = stdout.Write(b)
		return exitOK
	}
	if handled, code := inspectIgnitionFile(path, asJSON, stdout, stderr); handled {
		return code
	}
	info, err := image.Inspect(path)
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload inspect: %v\n", err)
		return exitInvalid
	}
	ignFile, ign, ignErr := imageIgnition(info) // ignition.go
	if asJSON && ign != nil {
		printJSON(stdout, struct {
			image.Info
			Ignition *payload.IgnitionSummary `json:"ignition"`
		}{info, ign})
		return exitOK
	}
	if asJSON {
		printJSON(stdout, info)
		return exitOK
	}
	fmt.Fprintf(stdout, "image:   %s\nlabel:   %s\nfstype:  %s\nsize:    %d\nsha256:  %s\n", info.Path, info.Label, info.FSType, info.Size, info.SHA256)
	if info.FSType == image.FSTypeISO9660 {
		// what Windows reads (issue 35)
		j := "no (Windows sees no files)"
		if info.Joliet {
			j = "yes, every file"
		}
		fmt.Fprintf(stdout, "joliet:  %s\n", j)
	}
	files := "files"
	if len(info.Files) == 1 {
		files = "file"
	}
	fmt.Fprintf(stdout, "files:   %d %s\n", len(info.Files), files)
	for _, f := range info.Files {
		fmt.Fprintf(stdout, "  %8d  %s\n", f.Size, f.Path)
	}
	if ign != nil {
		fmt.Fprintf(stdout, "%s is an Ignition config:\n%s", ignFile, ign.Text("  "))
	} else if ignErr != nil {
		fmt.Fprintf(stderr, "vmpayload inspect: %s: %v\n", ignFile, ignErr)
		return exitInvalid
	}
	return exitOK
}
