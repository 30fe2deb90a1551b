package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/job"
)

// parseBackend checks each job as the agent does before queueing it
// (job.Parse) and queues nothing.
type parseBackend struct{ Backend }

func (parseBackend) SubmitAs(data []byte, who result.Submitter) (string, error) {
	_, r := job.Parse(data)
	if err := r.Err(); err != nil {
		return "", err
	}
	return "x", nil
}

// worstJobs are the costliest submissions known (docs/reliability.md): a
// 1 MiB list of numbers, a 44 KB gzip bomb of 16 MiB of cloud-config, and
// the costliest cloud-config within the YAML limits.
func worstJobs(b *testing.B) [][]byte {
	var cc strings.Builder
	cc.WriteString("#cloud-config\nruncmd:\n")
	for cc.Len() < 16<<20-16 {
		cc.WriteString("- [true, a]\n")
	}
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	zw.Write([]byte(cc.String()))
	zw.Close()
	return [][]byte{
		[]byte(`{"version":1,"name":"w","meta_data":{"a":[0` + strings.Repeat(",0", job.MaxJobBytes/2-40) + `]}}`),
		[]byte(`{"version":1,"name":"bomb","user_data_base64":"` + base64.StdEncoding.EncodeToString(z.Bytes()) + `"}`),
		[]byte(`{"version":1,"name":"w","user_data":"#cloud-config\nx: [` + strings.Repeat("a,", job.MaxYAMLTokens/2-10) + `a]\n"}`),
	}
}

// peakRSS returns the process's peak resident set (VmHWM) in MiB.
func peakRSS(b *testing.B) float64 {
	s, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip(err)
	}
	for _, l := range strings.Split(string(s), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	b.Skip("no VmHWM")
	return 0
}

// BenchmarkConcurrentWorstCase posts 32 of the worst submissions at once
// (all three kinds in turn) to a server on a unix socket, and reports the
// process's peak RSS over each run: with the default admission, and with
// a budget that admits all 32 at once (as the 32 slots of ef40b13 did).
// Run each on its own (-run XXX -bench 'ConcurrentWorstCase/NAME'): the
// peak is the process's, reset through /proc/self/clear_refs.
func BenchmarkConcurrentWorstCase(b *testing.B) {
	jobs := worstJobs(b)
	for _, c := range []struct {
		name   string
		budget int64
	}{{"admission", 0}, {"unweighted", 1 << 40}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			sock := filepath.Join(dir, "s")
			l, err := Listen(sock, -1)
			if err != nil {
				b.Fatal(err)
			}
			srv := &Server{Backend: parseBackend{}, SubmitBudget: c.budget, SlotWait: 1 << 40}
			go srv.Serve(l)
			defer srv.Shutdown(context.Background())
			hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 64, MaxIdleConnsPerHost: 64,
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, "unix", sock)
				}}}
			debug.FreeOSMemory()
			if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
				b.Skip("cannot reset the peak RSS: ", err)
			}
			base := peakRSS(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for k := 0; k < 32; k++ {
					wg.Add(1)
					go func(k int) {
						defer wg.Done()
						resp, err := hc.Post("http://x/v1/jobs", "application/json", bytes.NewReader(jobs[k%len(jobs)]))
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusServiceUnavailable {
							b.Error("503")
						}
					}(k)
				}
				wg.Wait()
			}
			b.StopTimer()
			b.ReportMetric(peakRSS(b), "peak-RSS-MiB")
			b.ReportMetric(base, "base-RSS-MiB")
		})
	}
}
