package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vmpayload/vmpayload/agent/spool"
)

// SocketCheck is how often ServeKeeping checks that the socket is in place.
const SocketCheck = time.Second

// SocketDirMode is the permission of a socket directory the agent recreates.
const SocketDirMode = 0o755

// ServeKeeping serves on l, the listener Listen(path, gid) returned, until
// Shutdown, and keeps the socket in place meanwhile: when the socket file is
// gone (its directory removed by an operator or a clean-up of /run), it
// recreates the directory (SocketDirMode, never through a symlink) and the
// socket, serves the new listener and closes the old one. recreated, when
// not nil, is called after each recreation.
func (s *Server) ServeKeeping(l net.Listener, path string, gid int, recreated func()) error {
	s.init()
	var mu sync.Mutex
	retired := map[net.Listener]bool{}
	done := make(chan error, 1)
	serve := func(l net.Listener) {
		go func() {
			err := s.srv.Serve(&limitListener{Listener: l, s: s})
			mu.Lock()
			r := retired[l]
			mu.Unlock()
			if !r {
				select {
				case done <- err:
				default:
				}
			}
		}()
	}
	serve(l)
	t := time.NewTicker(SocketCheck)
	defer t.Stop()
	cur := l
	for {
		select {
		case err := <-done:
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		case <-t.C:
		}
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		nl, err := relisten(path, gid)
		if err != nil {
			s.log().Error("the API socket is gone and cannot be recreated", "socket", path, "err", err)
			continue
		}
		mu.Lock()
		retired[cur] = true
		mu.Unlock()
		if ul, ok := cur.(*net.UnixListener); ok {
			ul.SetUnlinkOnClose(false) // the path is the new socket's now
		}
		_ = cur.Close()
		cur = nl
		serve(nl)
		s.log().Warn("the API socket was missing; recreated it", "socket", path)
		if recreated != nil {
			recreated()
		}
	}
}

// relisten recreates a missing socket directory, refusing a symlink or
// other non-directory in its place, and listens on path again.
func relisten(path string, gid int) (net.Listener, error) {
	dir := filepath.Dir(path)
	st, err := os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, err := spool.EnsureDir(dir, SocketDirMode, -1); err != nil {
			return nil, fmt.Errorf("recreating the socket directory: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("checking the socket directory: %w", err)
	case !st.IsDir():
		return nil, fmt.Errorf("socket directory %s: %w", dir, spool.ErrNotDir)
	}
	return Listen(path, gid)
}
