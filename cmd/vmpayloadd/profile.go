package main

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
)

// startProfiles writes a CPU profile and, at the end, an allocation profile
// (alloc_space) into the directory VMPAYLOAD_PPROF_DIR names, for the
// benchmarks (test/bench -profile). Without the variable it does nothing.
// The returned function stops the CPU profile and writes the allocations.
func startProfiles() func() {
	dir := os.Getenv("VMPAYLOAD_PPROF_DIR")
	if dir == "" {
		return func() {}
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		cpu.Close()
		if f, err := os.Create(filepath.Join(dir, "allocs.pprof")); err == nil {
			runtime.GC()
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
}
