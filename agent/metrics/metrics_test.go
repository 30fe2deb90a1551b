package metrics

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/test/golden"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// expo returns the exposition of a registry or an Agent.
func expo(t *testing.T, w io.WriterTo) string {
	t.Helper()
	var b bytes.Buffer
	n, err := w.WriteTo(&b)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(b.Len()) {
		t.Errorf("WriteTo returned %d, wrote %d bytes", n, b.Len())
	}
	return b.String()
}

// parse parses text with the Prometheus text parser (test-only dependency)
// and fails the test on any error.
func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Prometheus parser rejects the exposition: %v\n%s", err, text)
	}
	return fams
}

// small is the registry of the format golden: every type, labels that need
// escaping, a func-backed gauge, a func-backed counter without a function
// and an empty histogram.
func small() registry {
	r := newRegistry(
		Def{Name: "events_total", Type: Counter, Help: "Events seen."},
		Def{Name: "requests_total", Type: Counter, Help: "Requests by method and path.\nSecond line with a \\ backslash.",
			Labels: []string{"method", "path"}},
		Def{Name: "temperature", Type: Gauge, Help: "A gauge."},
		Def{Name: "answer", Type: Gauge, Help: "A func-backed gauge."},
		Def{Name: "reconnects_total", Type: Counter, Help: "A func-backed counter without a function yet."},
		Def{Name: "latency_seconds", Type: Histogram, Help: "A histogram.", Buckets: []float64{0.01, 0.1, 1, 10}},
		Def{Name: "empty_seconds", Type: Histogram, Help: "An empty histogram.", Buckets: []float64{1, 2.5}},
	)
	for range 42 {
		r[0].with().inc()
	}
	v := r[1]
	for range 3 {
		v.with("GET", "/a").inc()
	}
	v.with("POST", `/quote"back\slash`+"\nnewline").inc()
	v.with("GET", "/").inc()
	v.with("DELETE", "/x") // exists at 0
	r[2].with().set(20.5)
	r[3].setFunc(func() float64 { return 42 })
	for _, x := range []float64{0.005, 0.01, 0.05, 0.5, 0.5, 3, 100} {
		r[5].with().observe(x)
	}
	return r
}

// recordAll records one of every Agent event with fixed values.
func recordAll(a *Agent) {
	a.JobReceived(SourceSpool)
	a.JobReceived(SourceSpool)
	a.JobReceived(SourceSocket)
	a.JobFinished(result.StateDone, 300*time.Millisecond)
	a.JobFinished(result.StateDone, 1200*time.Millisecond)
	a.JobFinished(result.StateFailed, 45*time.Second)
	a.BuildDone(20 * time.Millisecond)
	a.AttachDone(700 * time.Millisecond)
	a.SetLibvirtReconnects(func() uint64 { return 3 })
	a.QueueDepth(2)
	a.InFlight(1)
	a.ImageRemoved(ReasonSuperseded)
	a.Retry()
	a.MediaRecovery(RecoveryReplace)
	a.LibvirtTimeout("domain")
	a.LibvirtTimeout("define_xml")
	a.ResultRetry()
	a.ResultsPending(1)
	a.DirRecreated(DirPayload)
	a.GuestReport(result.GuestDone, 71.5)
	a.GuestReport(result.GuestTimeout, -1)
	a.SetLibvirtConnected(func() bool { return true })
	a.SetDegraded(func() []string { return []string{AreaSpool, AreaCleanup} })
	a.SetGoroutines(func() int { return 12 })
}

// TestGolden: the text format (small.prom) and the agent's exposition
// after one of every event (agent.prom) are byte for byte the goldens, and
// the same every time.
func TestGolden(t *testing.T) {
	tests := []struct {
		golden string
		make   func() io.WriterTo
	}{
		{"small.prom", func() io.WriterTo { return small() }},
		{"agent.prom", func() io.WriterTo { a := New(); recordAll(a); return a }},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			got := expo(t, tt.make())
			golden.Compare(t, filepath.Join("testdata", tt.golden), []byte(got), *update)
			parse(t, got)
			if again := expo(t, tt.make()); again != got {
				t.Error("exposition is not deterministic")
			}
		})
	}
}

func TestParsedValues(t *testing.T) {
	fams := parse(t, expo(t, small()))
	for name := range fams {
		if !strings.HasPrefix(name, Prefix) {
			t.Errorf("family %s lacks prefix %s", name, Prefix)
		}
	}
	if len(fams) != 7 {
		t.Errorf("parsed %d families, want 7", len(fams))
	}
	if v := fams["vmpayload_events_total"].Metric[0].GetCounter().GetValue(); v != 42 {
		t.Errorf("events_total = %v", v)
	}
	req := fams["vmpayload_requests_total"]
	if req.GetType() != dto.MetricType_COUNTER || len(req.Metric) != 4 {
		t.Fatalf("requests_total = %v", req)
	}
	if got, want := req.GetHelp(), "Requests by method and path.\nSecond line with a \\ backslash."; got != want {
		t.Errorf("help round trip: %q, want %q", got, want)
	}
	found := false
	for _, m := range req.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["path"] == `/quote"back\slash`+"\nnewline" {
			found = true
			if labels["method"] != "POST" || m.GetCounter().GetValue() != 1 {
				t.Errorf("escaped series = %v", m)
			}
		}
	}
	if !found {
		t.Error("label value with quote, backslash and newline did not round-trip")
	}
	if v := fams["vmpayload_temperature"].Metric[0].GetGauge().GetValue(); v != 20.5 {
		t.Errorf("temperature = %v", v)
	}
	if v := fams["vmpayload_answer"].Metric[0].GetGauge().GetValue(); v != 42 {
		t.Errorf("answer = %v", v)
	}
	if f := fams["vmpayload_reconnects_total"]; f.GetType() != dto.MetricType_COUNTER || f.Metric[0].GetCounter().GetValue() != 0 {
		t.Errorf("reconnects_total = %v", f)
	}
	h := fams["vmpayload_latency_seconds"].Metric[0].GetHistogram()
	if h.GetSampleCount() != 7 || math.Abs(h.GetSampleSum()-104.065) > 1e-9 {
		t.Errorf("latency count/sum = %d/%v", h.GetSampleCount(), h.GetSampleSum())
	}
	wantCum := map[float64]uint64{0.01: 2, 0.1: 3, 1: 5, 10: 6}
	for _, b := range h.Bucket {
		if want, ok := wantCum[b.GetUpperBound()]; ok && b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v = %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

func TestHistogramBounds(t *testing.T) {
	r := newRegistry(Def{Name: "h", Type: Histogram, Help: "h", Buckets: []float64{1, 2, math.Inf(+1)}}) // explicit +Inf is dropped
	s := r[0].with()
	for _, v := range []float64{1, 2.0000001, 1.5, -5} { // le is inclusive
		s.observe(v)
	}
	out := expo(t, r)
	for _, line := range []string{
		`vmpayload_h_bucket{le="1"} 2`,
		`vmpayload_h_bucket{le="2"} 3`,
		`vmpayload_h_bucket{le="+Inf"} 4`,
		`vmpayload_h_count 4`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("missing %q in\n%s", line, out)
		}
	}
	if strings.Count(out, `le="+Inf"`) != 1 {
		t.Errorf("+Inf bucket repeated:\n%s", out)
	}
	h := parse(t, out)["vmpayload_h"].Metric[0].GetHistogram()
	if math.Abs(h.GetSampleSum()-(1+2.0000001+1.5-5)) > 1e-9 {
		t.Errorf("sum = %v", h.GetSampleSum())
	}
}

func TestDefPanics(t *testing.T) {
	tests := []struct {
		name string
		fn   func()
	}{
		{"duplicate", func() { newRegistry(Def{Name: "x", Type: Counter}, Def{Name: "x", Type: Gauge}) }},
		{"bad name", func() { newFamily(Def{Name: "a-b", Type: Counter}) }},
		{"unknown type", func() { newFamily(Def{Name: "a", Type: "summary"}) }},
		{"bad label", func() { newFamily(Def{Name: "c", Type: Counter, Labels: []string{"bad-label"}}) }},
		{"reserved label", func() { newFamily(Def{Name: "c", Type: Counter, Labels: []string{"__x"}}) }},
		{"le on a histogram", func() { newFamily(Def{Name: "h", Type: Histogram, Labels: []string{"le"}}) }},
		{"repeated label", func() { newFamily(Def{Name: "c", Type: Counter, Labels: []string{"a", "a"}}) }},
		{"values without one label", func() { newFamily(Def{Name: "c", Type: Counter, Labels: []string{"a", "b"}, Values: []string{"x"}}) }},
		{"buckets on a counter", func() { newFamily(Def{Name: "c", Type: Counter, Buckets: []float64{1}}) }},
		{"unsorted buckets", func() { newFamily(Def{Name: "h", Type: Histogram, Buckets: []float64{1, 1}}) }},
		{"NaN bucket", func() { newFamily(Def{Name: "h", Type: Histogram, Buckets: []float64{math.NaN()}}) }},
		{"wrong label count", func() { newFamily(Def{Name: "c", Type: Counter, Labels: []string{"a"}}).with("1", "2") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tt.fn()
		})
	}
}

func TestFormatFloat(t *testing.T) {
	for in, want := range map[float64]string{
		0: "0", 1: "1", 0.005: "0.005", 2.5: "2.5", 1e21: "1e+21", -3: "-3",
		math.Inf(1): "+Inf", math.Inf(-1): "-Inf", math.NaN(): "NaN",
	} {
		if got := formatFloat(in); got != want {
			t.Errorf("formatFloat(%v) = %q, want %q", in, got, want)
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteToError(t *testing.T) {
	_, err := New().WriteTo(failWriter{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("error = %v", err)
	}
}

// once returns the sample lines of histogram name after one observation of
// sum, which falls into the buckets les (and +Inf).
func once(name, sum string, les ...string) []string {
	var lines []string
	for _, le := range append(les, "+Inf") {
		lines = append(lines, name+`_bucket{le="`+le+`"} 1`)
	}
	return append(lines, name+"_sum "+sum, name+"_count 1")
}

// TestAgentRecords: each Agent method changes exactly the series it
// documents, starting from a fresh agent where every preset series is 0.
func TestAgentRecords(t *testing.T) {
	tests := []struct {
		name   string
		record func(a *Agent)
		want   []string // sample lines that differ from a fresh agent's, in exposition order
	}{
		{"job received", func(a *Agent) { a.JobReceived(SourceSocket) },
			[]string{`vmpayload_jobs_received_total{source="socket"} 1`}},
		{"job finished", func(a *Agent) { a.JobFinished(result.StateFailed, 2*time.Second) },
			append(once("vmpayload_job_duration_seconds", "2", "2.5", "5", "10", "30", "60", "120", "300", "600"),
				`vmpayload_jobs_total{outcome="failed"} 1`)},
		{"build", func(a *Agent) { a.BuildDone(400 * time.Second) }, once("vmpayload_build_seconds", "400", "600")},
		{"attach beyond the last bucket", func(a *Agent) { a.AttachDone(time.Hour) }, once("vmpayload_attach_seconds", "3600")},
		{"reconnects", func(a *Agent) { a.SetLibvirtReconnects(func() uint64 { return 7 }) },
			[]string{`vmpayload_libvirt_reconnects_total 7`}},
		{"queue depth", func(a *Agent) { a.QueueDepth(5) }, []string{`vmpayload_queue_depth 5`}},
		{"in flight", func(a *Agent) { a.InFlight(3); a.InFlight(2) }, []string{`vmpayload_jobs_in_flight 2`}},
		{"image removed", func(a *Agent) { a.ImageRemoved(ReasonOrphan); a.ImageRemoved(ReasonOrphan) },
			[]string{`vmpayload_images_removed_total{reason="orphan"} 2`}},
		{"retry", func(a *Agent) { a.Retry() }, []string{`vmpayload_job_retries_total 1`}},
		{"media recovery", func(a *Agent) { a.MediaRecovery(RecoveryReset) },
			[]string{`vmpayload_media_recoveries_total{action="reset"} 1`}},
		{"libvirt timeout: a new series", func(a *Agent) { a.LibvirtTimeout("start") },
			[]string{`vmpayload_libvirt_timeouts_total{call="start"} 1`}},
		{"result retry", func(a *Agent) { a.ResultRetry() }, []string{`vmpayload_result_write_retries_total 1`}},
		{"results pending", func(a *Agent) { a.ResultsPending(8) }, []string{`vmpayload_results_pending 8`}},
		{"dir recreated", func(a *Agent) { a.DirRecreated(DirSocket) },
			[]string{`vmpayload_dirs_recreated_total{dir="socket"} 1`}},
		{"guest report without a time", func(a *Agent) { a.GuestReport(result.GuestTimeout, -1) },
			[]string{`vmpayload_guest_reports_total{status="timeout"} 1`}},
		{"guest report with a time", func(a *Agent) { a.GuestReport(result.GuestDegraded, 4) },
			append(once("vmpayload_guest_provision_seconds", "4", "5", "10", "20", "30", "45", "60", "90", "120", "180", "300", "600", "900", "1800", "3600"),
				`vmpayload_guest_reports_total{status="degraded"} 1`)},
	}
	fresh := strings.Split(expo(t, New()), "\n")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New()
			tt.record(a)
			var changed []string
			for _, line := range strings.Split(expo(t, a), "\n") {
				if !slices.Contains(fresh, line) {
					changed = append(changed, line)
				}
			}
			if !slices.Equal(changed, tt.want) {
				t.Errorf("changed lines\n%s\nwant\n%s", strings.Join(changed, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestNilAgent: a nil *Agent records nothing and writes nothing.
func TestNilAgent(t *testing.T) {
	var a *Agent
	recordAll(a)
	if got := expo(t, a); got != "" {
		t.Errorf("nil agent wrote %q", got)
	}
}

// TestConcurrent records from many goroutines while scraping; run with
// -race. Totals must be exact and every scrape must parse and be
// self-consistent.
func TestConcurrent(t *testing.T) {
	a := New()
	var reconnects sync.Mutex
	n := uint64(0)
	a.SetLibvirtReconnects(func() uint64 { reconnects.Lock(); defer reconnects.Unlock(); return n })

	const workers, perWorker = 16, 500
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scrapes := make(chan string, 1000)
	first := make(chan struct{}) // closed after the first scrape
	go func() {
		defer close(scrapes)
		for i := 0; ; i++ {
			if i == 1 {
				close(first)
			}
			select {
			case <-stop:
				return
			default:
			}
			var b bytes.Buffer
			_, _ = a.WriteTo(&b)
			select {
			case scrapes <- b.String():
			default:
			}
			time.Sleep(time.Millisecond)
		}
	}()
	<-first
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				a.JobReceived(SourceSpool)
				a.QueueDepth(i)
				a.BuildDone(time.Duration(i%7) * 10 * time.Millisecond)
				a.AttachDone(time.Duration(i) * time.Millisecond)
				a.LibvirtTimeout("call-" + strconv.Itoa(w%3)) // new series under contention
				a.Retry()
				a.JobFinished(result.StateDone, time.Second)
				reconnects.Lock()
				n++
				reconnects.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	nscrapes := 0
	for s := range scrapes {
		nscrapes++
		fams := parse(t, s)
		for _, name := range []string{"vmpayload_job_duration_seconds", "vmpayload_build_seconds"} {
			h := fams[name].Metric[0].GetHistogram()
			var prev uint64
			for _, b := range h.Bucket {
				if b.GetCumulativeCount() < prev {
					t.Fatalf("%s buckets not cumulative", name)
				}
				prev = b.GetCumulativeCount()
			}
			if prev > h.GetSampleCount() {
				t.Fatalf("%s: finite buckets %d > count %d", name, prev, h.GetSampleCount())
			}
		}
	}
	if nscrapes == 0 {
		t.Error("no scrape ran")
	}

	const total = workers * perWorker
	fams := parse(t, expo(t, a))
	value := func(name, label, lvalue string) float64 {
		for _, m := range fams[name].Metric {
			if len(m.Label) == 0 && label == "" || len(m.Label) == 1 && m.Label[0].GetName() == label && m.Label[0].GetValue() == lvalue {
				switch {
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				case m.Histogram != nil:
					return float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		t.Fatalf("no %s{%s=%q}", name, label, lvalue)
		return 0
	}
	for _, c := range []struct{ name, label, value string }{
		{"vmpayload_jobs_total", "outcome", string(result.StateDone)},
		{"vmpayload_jobs_received_total", "source", SourceSpool},
		{"vmpayload_job_retries_total", "", ""},
		{"vmpayload_libvirt_reconnects_total", "", ""},
		{"vmpayload_job_duration_seconds", "", ""},
		{"vmpayload_build_seconds", "", ""},
		{"vmpayload_attach_seconds", "", ""},
	} {
		if got := value(c.name, c.label, c.value); got != total {
			t.Errorf("%s{%s=%q} = %v, want %d", c.name, c.label, c.value, got, total)
		}
	}
	var timeouts float64
	for w := range 3 {
		timeouts += value("vmpayload_libvirt_timeouts_total", "call", "call-"+strconv.Itoa(w))
	}
	if timeouts != total {
		t.Errorf("libvirt_timeouts_total sum = %v, want %d", timeouts, total)
	}
	// Build observed (i%7)*0.01 for i in 0..perWorker-1 in each worker.
	var wantSum float64
	for i := range perWorker {
		wantSum += float64(i%7) * 0.01
	}
	wantSum *= workers
	if got := fams["vmpayload_build_seconds"].Metric[0].GetHistogram().GetSampleSum(); math.Abs(got-wantSum) > 1e-6 {
		t.Errorf("build sum = %v, want %v", got, wantSum)
	}
}

func BenchmarkCounterInc(b *testing.B) {
	a := New()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.Retry()
		}
	})
}

func BenchmarkHistogramObserve(b *testing.B) {
	a := New()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.BuildDone(300 * time.Millisecond)
		}
	})
}

// TestValuesFunc: a gauge read from a function at exposition time writes
// one sample per preset label value, sorted, 0 for a value the function
// leaves out, nothing for one it adds; each exposition calls it again.
func TestValuesFunc(t *testing.T) {
	r := newRegistry(Def{Name: "state", Type: Gauge, Help: "A state.", Labels: []string{"area"}, Values: []string{"b", "a", "c"}})
	now := map[string]float64{"a": 1, "zzz": 1}
	r[0].setValuesFunc(func() map[string]float64 { return now })
	want := "# HELP vmpayload_state A state.\n# TYPE vmpayload_state gauge\n" +
		"vmpayload_state{area=\"a\"} 1\nvmpayload_state{area=\"b\"} 0\nvmpayload_state{area=\"c\"} 0\n"
	if got := expo(t, r); got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
	parse(t, expo(t, r))
	now = map[string]float64{"c": 1}
	if got := expo(t, r); !strings.Contains(got, "vmpayload_state{area=\"a\"} 0\n") || !strings.Contains(got, "vmpayload_state{area=\"c\"} 1\n") {
		t.Errorf("second exposition does not follow the function:\n%s", got)
	}
	for _, d := range []Def{
		{Name: "free", Type: Gauge, Help: "No preset values.", Labels: []string{"x"}},
		{Name: "count_total", Type: Counter, Help: "Not a gauge.", Labels: []string{"x"}, Values: []string{"a"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("setValuesFunc on %s did not panic", d.Name)
				}
			}()
			newFamily(d).setValuesFunc(func() map[string]float64 { return nil })
		}()
	}
}
