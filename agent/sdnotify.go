package agent

import (
	"net"
	"os"
)

// Notify sends a systemd notification (sd_notify protocol: "READY=1",
// "STOPPING=1", "RELOADING=1", "STATUS=...") when the agent runs under a
// Type=notify unit; without NOTIFY_SOCKET it does nothing.
func Notify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state))
	return err
}
