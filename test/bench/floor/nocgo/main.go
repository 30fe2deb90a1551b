// Command nocgo is the benchmark's process-start floor for a Go program
// without cgo: it writes one line and exits. Built with CGO_ENABLED=0 it is
// a static executable (no dynamic loader, no libc).
package main

import "os"

func main() { os.Stdout.WriteString("floor\n") }
