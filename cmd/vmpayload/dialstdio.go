package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/spf13/cobra"
)

// "vmpayload dial-stdio" is what "--connect ssh://host" runs on the host
// (docs/remote.md): it joins its standard input and output to the agent's
// socket, so that the client's HTTP requests cross the ssh channel. It
// runs as the ssh user, whose uid the agent reads with SO_PEERCRED.

func newDialStdioCmd() *cobra.Command {
	var socket string
	cmd := command("dial-stdio", "join standard input and output to the agent socket (run by --connect ssh://)", 0, 0, nil,
		func(_ []string, _, stderr io.Writer) int {
			if socket == "" {
				socket = agentConfig().Socket
			}
			return dialStdio(socket, os.Stdin, os.Stdout, stderr)
		})
	cmd.Long = cmd.Short + "\n\n" +
		"The client commands' --connect ssh://[user@]host runs \"vmpayload dial-stdio\" on the host over ssh and " +
		"speaks the agent's HTTP API through it. It ends when either side closes: standard input's end " +
		"half-closes the socket, the agent's end ends it."
	cmd.Flags().StringVar(&socket, "socket", "", "agent socket `PATH` (default from /etc/vmpayload/agent.yaml)")
	return cmd
}

// dialStdio copies in to the socket and the socket to out until the agent
// closes its end (or the copy to out fails); at in's end it half-closes the
// socket so that the agent sees the end of the requests and closes in turn.
func dialStdio(socket string, in io.Reader, out io.WriteCloser, stderr io.Writer) int {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) {
			err = oe.Err
		}
		fmt.Fprintf(stderr, "vmpayload dial-stdio: no agent on %s: %v\n", socket, err)
		return exitUsage
	}
	defer conn.Close()
	toAgent := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, in)
		_ = conn.CloseWrite()
		toAgent <- err
	}()
	_, err = io.Copy(out, conn)
	_ = out.Close()
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload dial-stdio: %v\n", err)
		return exitUsage
	}
	return exitOK
}
