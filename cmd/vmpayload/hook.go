package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/syslog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmpayload/vmpayload/agent/config"
	"github.com/vmpayload/vmpayload/cmd/internal/cli"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/owner"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

// The libvirt qemu hook ("vmpayload hook DOMAIN OP SUBOP EXTRA", the domain
// XML on stdin). It rebuilds a domain's missing payload image from the
// recipe in the domain's metadata before QEMU opens it. It never calls
// libvirt: libvirt documents that a hook calling back into libvirt
// deadlocks. See docs/durability.md, "The hook".

func newHookCmd() *cobra.Command {
	var cfgPath string
	cmd := command("hook [flags] [--] DOMAIN OP SUBOP EXTRA  (domain XML on stdin)",
		"libvirt qemu hook: rebuild a domain's missing payload image from its recipe before it starts", 3, -1, nil,
		func(args []string, _, stderr io.Writer) int { return runHook(cfgPath, args, stderr) })
	cmd.Flags().StringVar(&cfgPath, "config", "", "agent configuration `FILE` (default $"+hookConfigEnv+", else "+config.DefaultPath+"; a missing file means defaults)")
	// libvirt passes "-" as EXTRA; flags end at the domain name
	cli.NotInterspersed(cmd)
	return cmd
}

// hookConfigEnv names a configuration file for the hook when --config is not
// given (tests; libvirt runs hooks with a cleared environment).
const hookConfigEnv = "VMPAYLOAD_CONFIG"

// hookStdin is where the hook reads the domain XML (a variable for tests);
// nil is os.Stdin (a nil default leaves main without a package init).
var hookStdin io.Reader

// hookSyslog logs one line to syslog/the journal at LOG_WARNING|LOG_DAEMON
// (a variable for tests). Errors are ignored (the line also goes to
// stderr), and a stalled log socket is given up on after a second: the hook
// must finish in bounded time.
var hookSyslog = func(line string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		w, err := syslog.New(syslog.LOG_WARNING|syslog.LOG_DAEMON, "vmpayload-hook")
		if err != nil {
			return
		}
		defer w.Close()
		_ = w.Warning(line)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}

// runHook runs the hook for the arguments libvirt passes (pos) with the
// configuration file cfgPath ("": the default).
func runHook(cfgPath string, pos []string, stderr io.Writer) int {
	domain, op, subop := pos[0], pos[1], pos[2]
	// prepare begin comes before libvirt checks the disks of a start;
	// migrate begin runs on the destination, restore begin before a
	// restore. Every other call exits 0 at once.
	switch op + " " + subop {
	case "prepare begin", "migrate begin", "restore begin":
	default:
		return exitOK // stdin is not read: the packaged script drains it
	}
	oneShotGC() // a hook process rebuilds at most one image and exits

	cfg, cfgErr := loadHookConfig(cmp.Or(cfgPath, os.Getenv(hookConfigEnv), config.DefaultPath))
	timeout := cfg.HookTimeout
	if cfgErr != nil || timeout <= 0 {
		timeout = config.Default().HookTimeout
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type result struct {
		outcome recipe.Outcome
		path    string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		o, p, err := hookRebuild(ctx, op, cfg, cfgErr)
		done <- result{o, p, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		res.err = fmt.Errorf("rebuilding the payload image: gave up after %s (hook_timeout)", timeout)
		// Give a write in progress a moment to see the cancellation and
		// remove its temporary file before the process exits.
		select {
		case <-done:
		case <-time.After(time.Second):
		}
	}
	if res.err == nil {
		if res.outcome == recipe.OutcomeRebuilt {
			hookSyslog(fmt.Sprintf("domain %s: %s: payload image %s rebuilt from its recipe", domain, op, res.path))
		}
		return exitOK
	}

	line := oneLine(fmt.Sprintf("vmpayload hook: domain %s: %s", domain, res.err.Error()))
	if cfg.HookFailure == "boot" { // the default's when the configuration is unreadable (loadHookConfig)
		line += " (hook_failure: boot: the domain starts without its payload)"
		hookSyslog(line)
		fmt.Fprintln(stderr, line)
		return exitOK
	}
	fmt.Fprintln(stderr, line)
	return exitInvalid
}

// hookRebuild reads the domain XML from hookStdin and, when it carries a
// recipe, makes sure its image is in place. A domain without a recipe is
// ("", "", nil), except for a restore or an incoming migration whose XML
// names a missing image in the payload directory (missingWithoutRecipe).
func hookRebuild(ctx context.Context, op string, cfg config.Config, cfgErr error) (recipe.Outcome, string, error) {
	in := cmp.Or[io.Reader](hookStdin, os.Stdin)
	data, err := io.ReadAll(io.LimitReader(in, recipe.MaxDomainXML+1))
	if err != nil {
		return "", "", fmt.Errorf("reading the domain XML on stdin: %w", err)
	}
	// the definition is read once: recipe, UUID and files come from it
	doc, r, ok, err := recipe.ReadDomainXML(string(data))
	if err != nil {
		return "", "", fmt.Errorf("reading the payload recipe: %w", err)
	}
	if !ok {
		if op == "restore" || op == "migrate" {
			return "", "", missingWithoutRecipe(doc, op, cfg.PayloadDir)
		}
		return "", "", nil
	}
	// the image, or the files of named values (credentials by fw_cfg;
	// none by SMBIOS, which live in the XML)
	path := strings.Join(r.Files(), " ")
	if cfgErr != nil {
		return "", path, cfgErr
	}
	gid, err := cfg.ImageGID()
	if err != nil {
		return "", path, fmt.Errorf("reading the configuration: %w", err)
	}
	// A recipe names only its own domain's image (<uuid>-…): one written
	// into vm1's metadata must neither replace nor claim vm2's.
	uuid := doc.UUID()
	if !domxml.IsUUID(uuid) {
		return "", path, fmt.Errorf("reading the domain's UUID: the domain XML has no valid <uuid> (%q)", uuid)
	}
	o, err := recipe.Rebuild(ctx, r, recipe.RebuildOptions{
		PayloadDir: cfg.PayloadDir, SecretsDir: cfg.SecretsDir, Mode: cfg.ImageMode(), GID: gid,
		DomainUUID: domxml.CanonicalUUID(uuid),
	})
	if err == nil {
		// The domain is about to run here (start, incoming migration,
		// restore): this host owns the image now, so that the host it came
		// from, sharing the payload directory, does not remove it
		// (package payload/owner). Not fatal: the image is in place.
		for _, f := range r.Files() {
			if cerr := owner.Claim(f, owner.HostID()); cerr != nil {
				hookSyslog(fmt.Sprintf("%v (the payload image is in place; a host sharing the payload directory may remove it)", cerr))
			}
		}
	}
	return o, path, err
}

// missingWithoutRecipe is the failure of a restore or an incoming migration
// whose domain XML has no recipe but a drive naming a file directly inside
// the payload directory that does not exist: the guest already read that
// medium (it runs on from the saved or migrated state), and without a recipe
// the hook cannot build it again, so QEMU would resume the guest with the
// drive emptied under it (startupPolicy='optional'). It happens when the XML
// given to the operation (virsh restore --xml, migrate --xml, a migrate hook)
// dropped the <metadata> recipe. A cold start ("prepare begin") is not
// refused this way: a booting guest has seen nothing yet, and a domain
// without a recipe never fails there. nil when every such file exists or
// the XML cannot be read (doc nil: libvirt then judges it).
func missingWithoutRecipe(doc *domxml.Document, op, payloadDir string) error {
	if doc == nil {
		return nil
	}
	dir := filepath.Clean(payloadDir)
	for _, f := range doc.ReferencedFiles() {
		if filepath.Dir(filepath.Clean(f)) != dir {
			continue
		}
		if _, err := os.Lstat(f); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the payload image %s is missing and the domain XML given to the %s carries no recipe to rebuild it (an XML that drops the vmpayload <metadata> element cannot have its payload rebuilt; use one that keeps it)", f, op)
		}
	}
	return nil
}

// loadHookConfig reads the agent configuration; a missing file gives the
// defaults.
func loadHookConfig(path string) (config.Config, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return config.Default(), nil
	}
	c, err := config.Load(path)
	if err != nil {
		return config.Default(), fmt.Errorf("reading the configuration: %w", err)
	}
	if err := c.Validate(); err != nil {
		return config.Default(), fmt.Errorf("reading the configuration %s: %w", path, err)
	}
	return c, nil
}

// oneLine joins the lines of a message, for libvirt's one-line start error.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}
