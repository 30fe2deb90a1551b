package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestDialStdioHalfClose: the end of standard input half-closes the socket,
// the agent still answers, and dial-stdio ends when the agent closes.
func TestDialStdioHalfClose(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	l := testenv.ListenUnix(t, sock)
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(c) // until the half-close
		got <- string(b)
		c.Write([]byte("answer to " + string(b)))
		c.Close()
	}()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- dialStdio(sock, strings.NewReader("request"), outW, &stderr) }()
	out, _ := io.ReadAll(outR)
	if code := <-done; code != exitOK || string(out) != "answer to request" || <-got != "request" {
		t.Errorf("exit %d, out %q, stderr %q", code, out, stderr.String())
	}

	// no agent: one line naming the socket, exit 2
	stderr.Reset()
	_, w, _ := os.Pipe()
	if code := dialStdio(filepath.Join(t.TempDir(), "none.sock"), strings.NewReader(""), w, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "no agent on ") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("no agent: exit %d, stderr %q", code, stderr.String())
	}
}
