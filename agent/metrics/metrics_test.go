package metrics

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
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
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// exposition returns r's text exposition.
func exposition(t *testing.T, r *Registry) string {
	t.Helper()
	var b bytes.Buffer
	n, err := r.WriteTo(&b)
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

// small builds the registry of the golden test.
func small() *Registry {
	r := NewRegistry()
	c := r.Counter("events_total", "Events seen.")
	c.Add(41)
	c.Inc()
	v := r.CounterVec("requests_total", "Requests by method and path.\nSecond line with a \\ backslash.", "method", "path")
	v.With("GET", "/a").Add(3)
	v.With("POST", `/quote"back\slash`+"\nnewline").Inc()
	v.With("GET", "/").Inc()
	v.With("DELETE", "/x") // exists at 0
	g := r.Gauge("temperature", "A gauge.")
	g.Set(21.5)
	g.Dec()
	r.GaugeFunc("answer", "A func-backed gauge.", func() float64 { return 42 })
	r.CounterFunc("reconnects_total", "A func-backed counter without a function yet.", nil)
	h := r.Histogram("latency_seconds", "A histogram.", []float64{0.01, 0.1, 1, 10})
	for _, x := range []float64{0.005, 0.01, 0.05, 0.5, 0.5, 3, 100} {
		h.Observe(x)
	}
	r.Histogram("empty_seconds", "An empty histogram.", []float64{1, 2.5})
	return r
}

func TestGolden(t *testing.T) {
	got := exposition(t, small())
	golden := filepath.Join("testdata", "small.prom")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("exposition differs from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
	// Same output every time (deterministic order).
	if again := exposition(t, small()); again != got {
		t.Error("exposition is not deterministic")
	}
}

func TestParsedValues(t *testing.T) {
	fams := parse(t, exposition(t, small()))
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
	r := NewRegistry()
	h := r.Histogram("h", "h", []float64{1, 2, math.Inf(+1)}) // explicit +Inf is dropped
	h.Observe(1)                                              // le is inclusive
	h.Observe(2.0000001)
	h.ObserveDuration(1500 * time.Millisecond)
	h.Observe(-5)
	out := exposition(t, r)
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
	if h.Count() != 4 || math.Abs(h.Sum()-(1+2.0000001+1.5-5)) > 1e-9 {
		t.Errorf("Count/Sum = %d/%v", h.Count(), h.Sum())
	}
	parse(t, out)
}

func TestRegistrationPanics(t *testing.T) {
	tests := []struct {
		name string
		fn   func(r *Registry)
	}{
		{"duplicate", func(r *Registry) { r.Counter("x", ""); r.Gauge("x", "") }},
		{"bad name", func(r *Registry) { r.Counter("a-b", "") }},
		{"bad label", func(r *Registry) { r.CounterVec("c", "", "bad-label") }},
		{"reserved label", func(r *Registry) { r.CounterVec("c", "", "__x") }},
		{"repeated label", func(r *Registry) { r.CounterVec("c", "", "a", "a") }},
		{"unsorted buckets", func(r *Registry) { r.Histogram("h", "", []float64{1, 1}) }},
		{"NaN bucket", func(r *Registry) { r.Histogram("h", "", []float64{math.NaN()}) }},
		{"wrong label count", func(r *Registry) { r.CounterVec("c", "", "a").With("1", "2") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tt.fn(NewRegistry())
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

func TestFuncSet(t *testing.T) {
	r := NewRegistry()
	f := r.CounterFunc("f_total", "f", nil)
	if f.Value() != 0 {
		t.Error("unset func not 0")
	}
	f.Set(func() float64 { return 7 })
	if !strings.Contains(exposition(t, r), "vmpayload_f_total 7\n") {
		t.Error("func value not exposed")
	}
	f.Set(nil)
	if f.Value() != 0 {
		t.Error("func reset not 0")
	}
}

func TestHandler(t *testing.T) {
	r := small()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ContentType {
		t.Errorf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if body.String() != exposition(t, r) {
		t.Error("handler body differs from WriteTo")
	}
	if got := expfmt.ResponseFormat(resp.Header); got.FormatType() != expfmt.TypeTextPlain {
		t.Errorf("Prometheus sees format %v", got)
	}
	post, err := http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST status %d", post.StatusCode)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteToError(t *testing.T) {
	_, err := small().WriteTo(failWriter{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("error = %v", err)
	}
}

// TestConcurrent records from many goroutines while scraping; run with
// -race. Totals must be exact and every scrape must parse and be
// self-consistent.
func TestConcurrent(t *testing.T) {
	a := NewAgent()
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
			_, _ = a.Registry.WriteTo(&b)
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
				start := time.Now()
				a.JobReceived(SourceSpool)
				a.QueueDepth.Inc()
				a.JobsInFlight.Inc()
				a.Build.Observe(float64(i%7) * 0.01)
				a.Attach.ObserveDuration(time.Duration(i) * time.Millisecond)
				a.ImagesRemoved.With("custom-" + strconv.Itoa(w%3)).Inc() // new series under contention
				a.JobRetries.Inc()
				a.JobsInFlight.Dec()
				a.QueueDepth.Dec()
				a.JobFinished(OutcomeDone, start)
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
	fams := parse(t, exposition(t, a.Registry))
	counter := func(name, label, value string) float64 {
		for _, m := range fams[name].Metric {
			if len(m.Label) == 0 && label == "" || len(m.Label) == 1 && m.Label[0].GetName() == label && m.Label[0].GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
		t.Fatalf("no %s{%s=%q}", name, label, value)
		return 0
	}
	if got := counter("vmpayload_jobs_total", "outcome", OutcomeDone); got != total {
		t.Errorf("jobs_total{done} = %v, want %d", got, total)
	}
	if got := counter("vmpayload_jobs_received_total", "source", SourceSpool); got != total {
		t.Errorf("jobs_received_total{spool} = %v", got)
	}
	if got := counter("vmpayload_job_retries_total", "", ""); got != total {
		t.Errorf("job_retries_total = %v", got)
	}
	if got := counter("vmpayload_libvirt_reconnects_total", "", ""); got != total {
		t.Errorf("libvirt_reconnects_total = %v", got)
	}
	var custom float64
	for w := range 3 {
		custom += counter("vmpayload_images_removed_total", "reason", "custom-"+strconv.Itoa(w))
	}
	if custom != total {
		t.Errorf("images_removed_total custom sum = %v", custom)
	}
	if a.QueueDepth.Value() != 0 || a.JobsInFlight.Value() != 0 {
		t.Errorf("gauges = %v, %v; want 0", a.QueueDepth.Value(), a.JobsInFlight.Value())
	}
	if a.JobDuration.Count() != total || a.Build.Count() != total || a.Attach.Count() != total {
		t.Errorf("histogram counts %d %d %d", a.JobDuration.Count(), a.Build.Count(), a.Attach.Count())
	}
	// Build observed (i%7)*0.01 for i in 0..perWorker-1 in each worker.
	var wantSum float64
	for i := range perWorker {
		wantSum += float64(i%7) * 0.01
	}
	wantSum *= workers
	if math.Abs(a.Build.Sum()-wantSum) > 1e-6 {
		t.Errorf("build sum = %v, want %v", a.Build.Sum(), wantSum)
	}
}

func TestAgent(t *testing.T) {
	a := NewAgent()
	fams := parse(t, exposition(t, a.Registry))
	want := map[string]dto.MetricType{
		"vmpayload_jobs_total":                 dto.MetricType_COUNTER,
		"vmpayload_jobs_received_total":        dto.MetricType_COUNTER,
		"vmpayload_job_duration_seconds":       dto.MetricType_HISTOGRAM,
		"vmpayload_build_seconds":              dto.MetricType_HISTOGRAM,
		"vmpayload_attach_seconds":             dto.MetricType_HISTOGRAM,
		"vmpayload_libvirt_reconnects_total":   dto.MetricType_COUNTER,
		"vmpayload_queue_depth":                dto.MetricType_GAUGE,
		"vmpayload_jobs_in_flight":             dto.MetricType_GAUGE,
		"vmpayload_images_removed_total":       dto.MetricType_COUNTER,
		"vmpayload_job_retries_total":          dto.MetricType_COUNTER,
		"vmpayload_media_recoveries_total":     dto.MetricType_COUNTER,
		"vmpayload_result_write_retries_total": dto.MetricType_COUNTER,
		"vmpayload_results_pending":            dto.MetricType_GAUGE,
		"vmpayload_dirs_recreated_total":       dto.MetricType_COUNTER,
		"vmpayload_guest_reports_total":        dto.MetricType_COUNTER,
		"vmpayload_guest_provision_seconds":    dto.MetricType_HISTOGRAM,
	}
	if len(fams) != len(want) {
		t.Errorf("%d families, want %d", len(fams), len(want))
	}
	for name, typ := range want {
		f, ok := fams[name]
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		if f.GetType() != typ || f.GetHelp() == "" {
			t.Errorf("%s: type %v help %q", name, f.GetType(), f.GetHelp())
		}
	}
	// Known label values are present from the start.
	labels := map[string][]string{
		"vmpayload_jobs_total":           {OutcomeDone, OutcomeFailed},
		"vmpayload_jobs_received_total":  {SourceSpool, SourceSocket},
		"vmpayload_images_removed_total": {ReasonUndefined, ReasonOrphan, ReasonSuperseded, ReasonDetach, ReasonUnattached},
		"vmpayload_dirs_recreated_total": {DirPayload, DirSpool, DirSocket},
		"vmpayload_guest_reports_total":  GuestStatuses,
	}
	for name, values := range labels {
		var got []string
		for _, m := range fams[name].Metric {
			got = append(got, m.Label[0].GetValue())
		}
		if strings.Join(got, ",") != strings.Join(slices.Sorted(slices.Values(values)), ",") {
			t.Errorf("%s series %v, want %v", name, got, values)
		}
	}
	// Buckets span milliseconds to minutes.
	b := fams["vmpayload_build_seconds"].Metric[0].GetHistogram().Bucket
	if b[0].GetUpperBound() > 0.01 || b[len(b)-1].GetUpperBound() < 300 {
		t.Errorf("buckets %v .. %v", b[0].GetUpperBound(), b[len(b)-1].GetUpperBound())
	}

	a.JobReceived(SourceSocket)
	a.JobFinished(OutcomeFailed, time.Now().Add(-2*time.Second))
	a.ImageRemoved(ReasonOrphan)
	a.SetLibvirtReconnects(func() uint64 { return 3 })
	out := exposition(t, a.Registry)
	for _, line := range []string{
		`vmpayload_jobs_received_total{source="socket"} 1`,
		`vmpayload_jobs_total{outcome="failed"} 1`,
		`vmpayload_jobs_total{outcome="done"} 0`,
		`vmpayload_images_removed_total{reason="orphan"} 1`,
		`vmpayload_job_duration_seconds_bucket{le="1"} 0`,
		`vmpayload_job_duration_seconds_bucket{le="2.5"} 1`,
		`vmpayload_libvirt_reconnects_total 3`,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("missing %q", line)
		}
	}
}

func BenchmarkCounterInc(b *testing.B) {
	c := NewRegistry().Counter("c", "")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
		}
	})
}

func BenchmarkHistogramObserve(b *testing.B) {
	h := NewRegistry().Histogram("h", "", DurationBuckets())
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Observe(0.3)
		}
	})
}
