// Command vmpayloadd is the vmpayload host agent: the one binary of the
// project that links libvirt (libvirt.org/go/libvirt). "vmpayload agent"
// runs it; "vmpayloadd --help" lists its flags.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/access"
	"github.com/vmpayload/vmpayload/agent/api"
	"github.com/vmpayload/vmpayload/agent/config"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/cmd/internal/cli"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/owner"
)

// agentOptions turns a configuration into agent options.
func agentOptions(c config.Config, host libvirtx.Host, log *slog.Logger) (agent.Options, error) {
	bus, busErr := domxml.ParseBus(c.CDROMBus)
	gid, gidErr := c.ImageGID()
	adminGID, adminErr := c.AdminGID()
	spoolGID, spoolErr := c.SpoolGID()
	if err := cmp.Or(busErr, gidErr, adminErr, spoolErr); err != nil {
		return agent.Options{}, err
	}
	return agent.Options{Host: host, SpoolDir: c.SpoolDir, PayloadDir: c.PayloadDir, SecretsDir: c.SecretsDir,
		Workers: c.Workers, QueueLimit: c.QueueLimit, RescanInterval: c.RescanInterval,
		DefaultFormat: job.Format(c.DefaultFormat), Bus: bus, ImageMode: c.ImageMode(), ImageGID: gid, Log: log,
		Policy: access.NewPolicy(adminGID), LibvirtTimeout: c.LibvirtTimeout, PrebuiltDirs: c.PrebuiltDirList(),
		GuestReport: c.GuestReport, GuestTimeout: c.GuestTimeout,
		SpoolGroup: spoolGID, HasSpoolGroup: spoolGID >= 0, HostID: owner.HostID(),
		ResultRetention: spool.Retention{MaxCount: c.ResultRetentionCount, MaxAge: c.ResultRetentionAge}}, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the daemon's command line and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Execute(cli.NewDaemonCommand(runAgent), args, stdout, stderr)
}

// runAgent runs the agent with the effective configuration cfg until
// SIGTERM or SIGINT; args are the configuration flags, re-resolved on SIGHUP.
func runAgent(cfg config.Config, args []string, _, stderr io.Writer) int {
	log, err := cfg.Logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cli.DaemonName, err)
		return cli.ExitUsage
	}
	slog.SetDefault(log)
	defer startProfiles()()
	if err := serveAgent(cfg, args, log); err != nil {
		log.Error("agent failed", "err", err)
		return 1
	}
	return cli.ExitOK
}

func serveAgent(cfg config.Config, args []string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// libvirtd may still be starting (or restarting): wait for it.
	var host *libvirtx.LibvirtHost
	for delay := 200 * time.Millisecond; ; delay = min(delay*2, 5*time.Second) {
		var err error
		host, err = libvirtx.OpenHost(cfg.LibvirtURI, libvirtx.HostOptions{Logger: log})
		if err == nil {
			break
		}
		if errors.Is(err, libvirtx.ErrNotInstalled) {
			return err // waiting will not install it
		}
		log.Warn("connecting to libvirt; retrying", "uri", cfg.LibvirtURI, "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
	defer host.Close()

	met := metrics.New()
	met.SetLibvirtReconnects(host.Reconnects)
	met.SetGoroutines(runtime.NumGoroutine)
	opts, err := agentOptions(cfg, host, log)
	if err != nil {
		return err
	}
	opts.Metrics = met
	a, err := agent.New(opts)
	if err != nil {
		return err
	}
	sockGID, err := cfg.SocketGID()
	if err != nil {
		return err
	}
	l, err := api.Listen(cfg.Socket, sockGID)
	if err != nil {
		return err
	}
	srv := &api.Server{Backend: a, Log: log, Metrics: met,
		MaxConnections: cfg.MaxConnections, MaxConnectionsPerUID: cfg.MaxConnectionsPerUID,
		MaxEventSubscribers: cfg.MaxEventSubscribers, MaxEventSubscribersPerUID: cfg.MaxEventSubscribersPerUID,
		FDReserve: api.FDReserveFor(cfg.Workers)}
	srvErr := make(chan error, 1)
	go func() {
		srvErr <- srv.ServeKeeping(l, cfg.Socket, sockGID, func() { met.DirRecreated(metrics.DirSocket) })
	}()
	defer os.Remove(cfg.Socket)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			_ = agent.Notify("RELOADING=1")
			nc, err := cli.ResolveDaemonConfig(args)
			if err != nil {
				log.Error("reloading configuration failed; keeping the old one", "err", err)
				_ = agent.Notify("READY=1")
				continue
			}
			nlog, err := nc.Logger(os.Stderr)
			if err == nil {
				slog.SetDefault(nlog)
			}
			no, err := agentOptions(nc, host, nlog)
			if err != nil {
				log.Error("reloading configuration failed; keeping the old one", "err", err)
			} else {
				a.Reload(no)
			}
			_ = agent.Notify("READY=1")
		}
	}()

	runErr := a.Run(ctx, func() {
		_ = agent.Notify("READY=1\nSTATUS=running")
	})
	_ = agent.Notify("STOPPING=1")
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	if err := <-srvErr; err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}
