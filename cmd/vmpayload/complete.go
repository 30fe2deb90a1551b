package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/config"
)

// Shell completion of the names the commands take. vmpayload does not link
// libvirt and the agent's API lists jobs, not domains, so domain names come
// from virsh.

// completeTimeout bounds what a completion may wait for (virsh, the agent).
const completeTimeout = 3 * time.Second

// completeDomains completes a DOMAIN argument (the first positional one)
// with the names "virsh list --all --name" prints: for the connection
// LIBVIRT_DEFAULT_URI names when it is set (virsh reads it), else the agent's
// libvirt_uri from /etc/vmpayload/agent.yaml.
func completeDomains(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	virshArgs := []string{"-q", "list", "--all", "--name"}
	if os.Getenv("LIBVIRT_DEFAULT_URI") == "" {
		virshArgs = append([]string{"-c", agentConfig().LibvirtURI}, virshArgs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "virsh", virshArgs...).Output()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, n := range strings.Split(string(out), "\n") {
		if n = strings.TrimSpace(n); n != "" && strings.HasPrefix(n, toComplete) {
			names = append(names, n)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeJobIDs returns the IDs of the recent jobs of the agent cl reaches
// (none when no agent answers).
func completeJobIDs(cl *client.Client) []string {
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	defer cl.CloseIdleConnections()
	jobs, err := cl.Jobs(ctx)
	if err != nil {
		cobra.CompDebugln("vmpayload: listing the agent's jobs: "+err.Error(), false)
		return nil
	}
	ids := make([]string, 0, len(jobs))
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// agentConfig is the agent's configuration file, or the defaults.
func agentConfig() config.Config {
	if c, err := config.Load(config.DefaultPath); err == nil {
		return c
	}
	return config.Default()
}
