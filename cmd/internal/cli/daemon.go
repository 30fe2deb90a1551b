package cli

import (
	"flag"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vmpayload/vmpayload/agent/config"
)

// DaemonName is the daemon's binary; DaemonPath is where the packages
// install it (beside libvirtd in /usr/sbin: it is started by systemd, not by
// users).
const (
	DaemonName = "vmpayloadd"
	DaemonPath = "/usr/sbin/" + DaemonName
)

// daemonLong is the daemon's description (its man page's DESCRIPTION).
const daemonLong = `vmpayloadd is the vmpayload host agent. It takes job documents from the
spool directory and the API socket, renders each job's cloud-init payload,
attaches it to the libvirt domain as a read-only drive and starts the domain,
then follows the domain's lifecycle. It is started by systemd
(vmpayload.service); "vmpayload agent ARGS" runs it with the same arguments.

Every configuration key has a flag of the same name (underscores become
dashes); a flag overrides the file, which overrides the built-in defaults.
SIGHUP reloads the configuration.

Files:

    /etc/vmpayload/agent.yaml      configuration (a package conffile, kept on upgrade)
    /etc/vmpayload/secrets/        secrets directory (0700)
    /var/spool/vmpayload/          job spool: incoming/, processing/, done/, failed/
    /run/vmpayload/vmpayload.sock  the API socket
    /run/payload/                  payload images
    /etc/libvirt/hooks/qemu.d/vmpayload   libvirt qemu hook: runs "vmpayload hook"`

// DaemonServe runs the daemon with the effective configuration. args are
// the configuration flags as given (--name=value), for re-resolving the
// configuration on SIGHUP; it returns the exit code.
type DaemonServe func(cfg config.Config, args []string, stdout, stderr io.Writer) int

// NewDaemonCommand returns the daemon's command: its flags are the
// configuration keys of agent/config, --config and --print-config. serve runs
// the daemon; the pure binary passes nil (it only generates the daemon's man
// page and completion from the command).
func NewDaemonCommand(serve DaemonServe) *cobra.Command {
	gofs := daemonFlagSet()
	cmd := &cobra.Command{
		Use:   DaemonName + " [flags]",
		Short: "the vmpayload host agent: spool and socket intake, libvirt attach and start, lifecycle",
		Long:  daemonLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The flags given, in --name=value form, go through
			// config.Resolve, which owns the defaults, the file and the
			// validation; the reload on SIGHUP repeats it.
			var args []string
			cmd.Flags().Visit(func(f *pflag.Flag) {
				if f.Name != "print-config" && f.Name != "help" {
					args = append(args, "--"+f.Name+"="+f.Value.String())
				}
			})
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			cfg, err := ResolveDaemonConfig(args)
			if err != nil {
				fmt.Fprintf(stderr, "%s: %v\n", DaemonName, err)
				return ExitCode(ExitUsage)
			}
			if show, _ := cmd.Flags().GetBool("print-config"); show {
				b, err := cfg.YAML()
				if err != nil {
					fmt.Fprintf(stderr, "%s: %v\n", DaemonName, err)
					return ExitCode(ExitUsage)
				}
				_, _ = stdout.Write(b)
				return nil
			}
			if serve == nil {
				fmt.Fprintf(stderr, "%s: this binary does not run the agent; run %s\n", DaemonName, DaemonPath)
				return ExitCode(ExitUsage)
			}
			return Code(serve(cfg, args, stdout, stderr))
		},
	}
	cmd.Flags().AddGoFlagSet(gofs)
	return cmd
}

// daemonFlagSet defines the daemon's flags on a standard FlagSet, as
// config.Resolve expects them.
func daemonFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(DaemonName, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("config", config.DefaultPath, "configuration file (YAML; empty: built-in defaults only)")
	d := config.Default()
	d.RegisterFlags(fs)
	fs.Bool("print-config", false, "print the effective configuration as YAML and exit")
	return fs
}

// ResolveDaemonConfig returns the effective configuration for the daemon's
// flags args (as NewDaemonCommand passes them to DaemonServe).
func ResolveDaemonConfig(args []string) (config.Config, error) {
	return config.Resolve(daemonFlagSet(), args)
}
