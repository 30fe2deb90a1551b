// Command cgo is the benchmark's process-start floor for a Go program that
// uses cgo, as the daemon vmpayloadd must (libvirt's Go binding): dynamically linked
// against libc, with the runtime's cgo start-up; it makes one C call,
// writes one line and exits.
package main

// #include <unistd.h>
import "C"

import "os"

func main() {
	C.getpid()
	os.Stdout.WriteString("floor\n")
}
