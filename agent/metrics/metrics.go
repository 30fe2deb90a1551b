// Package metrics is a small, dependency-free metrics registry that writes
// the Prometheus text exposition format 0.0.4.
//
// It offers counters (optionally labelled), gauges, func-backed counters and
// gauges, and histograms with fixed buckets. Every metric name gets the
// prefix "vmpayload_". Recording is safe for concurrent use and lock-free
// (atomics) except for the first use of a new label combination. Output is
// deterministic: families sorted by name, series sorted by label values.
//
// Agent bundles the metrics the vmpayload agent records.
package metrics

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Prefix is prepended to every metric name.
const Prefix = "vmpayload_"

// ContentType is the HTTP content type of the exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

var (
	nameRe  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelRe = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// family is one metric family in a registry.
type family interface {
	// write appends the family's sample lines (not HELP/TYPE) to b.
	write(b *bytes.Buffer, name string)
}

// entry is a registered family with its metadata.
type entry struct {
	name, help, typ string
	f               family
}

// Registry holds metric families and writes them in the text format. The
// zero value is not usable; call NewRegistry. Registration methods panic on
// invalid or duplicate names, which are programming errors.
type Registry struct {
	mu      sync.Mutex
	entries map[string]*entry
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{entries: map[string]*entry{}}
}

// register adds a family under Prefix+name.
func (r *Registry) register(name, help, typ string, labels []string, f family) {
	full := Prefix + name
	if !nameRe.MatchString(full) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", full))
	}
	seen := map[string]bool{}
	for _, l := range labels {
		if !labelRe.MatchString(l) || strings.HasPrefix(l, "__") || (typ == "histogram" && l == "le") || seen[l] {
			panic(fmt.Sprintf("metrics: %s: invalid or repeated label name %q", full, l))
		}
		seen[l] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.entries[full]; dup {
		panic(fmt.Sprintf("metrics: metric %s registered twice", full))
	}
	r.entries[full] = &entry{name: full, help: help, typ: typ, f: f}
}

// Counter registers and returns a counter without labels.
func (r *Registry) Counter(name, help string) *Counter {
	c := &Counter{}
	r.register(name, help, "counter", nil, c)
	return c
}

// CounterVec registers a counter family with the given label names. Series
// are created on first use by With.
func (r *Registry) CounterVec(name, help string, labels ...string) *CounterVec {
	v := &CounterVec{labels: slices.Clone(labels), series: map[string]*series{}}
	r.register(name, help, "counter", labels, v)
	return v
}

// CounterFunc registers a counter whose value is read from a function at
// exposition time (for counts kept elsewhere). The function can be set or
// replaced later with Func.Set; until then the value is 0.
func (r *Registry) CounterFunc(name, help string, fn func() float64) *Func {
	f := &Func{}
	f.Set(fn)
	r.register(name, help, "counter", nil, f)
	return f
}

// Gauge registers and returns a gauge.
func (r *Registry) Gauge(name, help string) *Gauge {
	g := &Gauge{}
	r.register(name, help, "gauge", nil, g)
	return g
}

// GaugeFunc registers a gauge whose value is read from a function at
// exposition time.
func (r *Registry) GaugeFunc(name, help string, fn func() float64) *Func {
	f := &Func{}
	f.Set(fn)
	r.register(name, help, "gauge", nil, f)
	return f
}

// Histogram registers a histogram with the given bucket upper bounds, which
// must be strictly increasing and finite (+Inf is implied).
func (r *Registry) Histogram(name, help string, buckets []float64) *Histogram {
	h := newHistogram(Prefix+name, buckets)
	r.register(name, help, "histogram", nil, h)
	return h
}

// WriteTo writes every family in the Prometheus text format 0.0.4, sorted by
// name. It implements io.WriterTo.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	entries := make([]*entry, 0, len(r.entries))
	for _, e := range r.entries {
		entries = append(entries, e)
	}
	r.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })

	var b bytes.Buffer
	for _, e := range entries {
		b.WriteString("# HELP ")
		b.WriteString(e.name)
		b.WriteByte(' ')
		b.WriteString(escapeHelp(e.help))
		b.WriteString("\n# TYPE ")
		b.WriteString(e.name)
		b.WriteByte(' ')
		b.WriteString(e.typ)
		b.WriteByte('\n')
		e.f.write(&b, e.name)
	}
	n, err := w.Write(b.Bytes())
	if err != nil {
		return int64(n), fmt.Errorf("metrics: write exposition: %w", err)
	}
	return int64(n), nil
}

// Handler returns an HTTP handler serving the registry's exposition.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var b bytes.Buffer
		_, _ = r.WriteTo(&b) // writing to a bytes.Buffer does not fail
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
		if req.Method == http.MethodGet {
			_, _ = w.Write(b.Bytes())
		}
	})
}

// Counter is a monotonically increasing count.
type Counter struct {
	v atomic.Uint64
}

// Inc adds 1.
func (c *Counter) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Value returns the current count.
func (c *Counter) Value() uint64 { return c.v.Load() }

func (c *Counter) write(b *bytes.Buffer, name string) {
	writeSample(b, name, "", strconv.FormatUint(c.Value(), 10))
}

// series is one labelled counter of a CounterVec.
type series struct {
	labels string // rendered label pairs without braces
	values []string
	c      Counter
}

// CounterVec is a family of counters told apart by label values.
type CounterVec struct {
	labels []string
	mu     sync.RWMutex
	series map[string]*series
}

// With returns the counter for the given label values, one per label name
// in registration order, creating it (at 0) on first use. It panics if the
// number of values is wrong.
func (v *CounterVec) With(values ...string) *Counter {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %d label values for labels %v", len(values), v.labels))
	}
	key := strings.Join(values, "\xff")
	v.mu.RLock()
	s := v.series[key]
	v.mu.RUnlock()
	if s != nil {
		return &s.c
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s = v.series[key]; s == nil {
		s = &series{labels: renderLabels(v.labels, values), values: slices.Clone(values)}
		v.series[key] = s
	}
	return &s.c
}

func (v *CounterVec) write(b *bytes.Buffer, name string) {
	v.mu.RLock()
	all := make([]*series, 0, len(v.series))
	for _, s := range v.series {
		all = append(all, s)
	}
	v.mu.RUnlock()
	sort.Slice(all, func(i, j int) bool { return slices.Compare(all[i].values, all[j].values) < 0 })
	for _, s := range all {
		writeSample(b, name, s.labels, strconv.FormatUint(s.c.Value(), 10))
	}
}

// Gauge is a value that goes up and down.
type Gauge struct {
	bits atomic.Uint64 // math.Float64bits of the value
}

// Set sets the value.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Add adds d (which may be negative).
func (g *Gauge) Add(d float64) { addFloat(&g.bits, d) }

// Inc adds 1.
func (g *Gauge) Inc() { g.Add(1) }

// Dec subtracts 1.
func (g *Gauge) Dec() { g.Add(-1) }

// Value returns the current value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

func (g *Gauge) write(b *bytes.Buffer, name string) {
	writeSample(b, name, "", formatFloat(g.Value()))
}

// Func is a counter or gauge whose value comes from a function called at
// exposition time. The function must be safe for concurrent use.
type Func struct {
	fn atomic.Pointer[func() float64]
}

// Set sets or replaces the function; nil makes the value 0.
func (f *Func) Set(fn func() float64) {
	if fn == nil {
		f.fn.Store(nil)
		return
	}
	f.fn.Store(&fn)
}

// Value calls the function and returns its result, 0 if there is none.
func (f *Func) Value() float64 {
	if p := f.fn.Load(); p != nil {
		return (*p)()
	}
	return 0
}

func (f *Func) write(b *bytes.Buffer, name string) {
	writeSample(b, name, "", formatFloat(f.Value()))
}

// Histogram counts observations in fixed buckets.
type Histogram struct {
	upper  []float64       // bucket upper bounds, increasing
	les    []string        // rendered le label values, including "+Inf"
	counts []atomic.Uint64 // per bucket, not cumulative; last is +Inf only
	sum    atomic.Uint64   // math.Float64bits of the sum
}

func newHistogram(name string, buckets []float64) *Histogram {
	upper := slices.Clone(buckets)
	if n := len(upper); n > 0 && math.IsInf(upper[n-1], +1) {
		upper = upper[:n-1]
	}
	for i, u := range upper {
		if math.IsNaN(u) || math.IsInf(u, 0) || (i > 0 && u <= upper[i-1]) {
			panic(fmt.Sprintf("metrics: %s: buckets must be finite and strictly increasing: %v", name, buckets))
		}
	}
	les := make([]string, 0, len(upper)+1)
	for _, u := range upper {
		les = append(les, formatFloat(u))
	}
	les = append(les, "+Inf")
	return &Histogram{upper: upper, les: les, counts: make([]atomic.Uint64, len(upper)+1)}
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.upper, v) // first bucket with upper >= v
	h.counts[i].Add(1)
	addFloat(&h.sum, v)
}

// ObserveDuration records a duration in seconds.
func (h *Histogram) ObserveDuration(d time.Duration) { h.Observe(d.Seconds()) }

// Since records the time elapsed since start, in seconds.
func (h *Histogram) Since(start time.Time) { h.ObserveDuration(time.Since(start)) }

// Count returns the number of observations.
func (h *Histogram) Count() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// Sum returns the sum of the observations.
func (h *Histogram) Sum() float64 { return math.Float64frombits(h.sum.Load()) }

func (h *Histogram) write(b *bytes.Buffer, name string) {
	// Buckets are read once; _count is their total, so the +Inf bucket and
	// _count always agree. _sum may lag or lead by concurrent observations.
	var cum uint64
	for i, le := range h.les {
		cum += h.counts[i].Load()
		writeSample(b, name+"_bucket", `le="`+le+`"`, strconv.FormatUint(cum, 10))
	}
	writeSample(b, name+"_sum", "", formatFloat(h.Sum()))
	writeSample(b, name+"_count", "", strconv.FormatUint(cum, 10))
}

// addFloat atomically adds d to the float64 stored as bits in p.
func addFloat(p *atomic.Uint64, d float64) {
	for {
		old := p.Load()
		if p.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// writeSample writes one sample line; labels are rendered pairs or "".
func writeSample(b *bytes.Buffer, name, labels, value string) {
	b.WriteString(name)
	if labels != "" {
		b.WriteByte('{')
		b.WriteString(labels)
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(value)
	b.WriteByte('\n')
}

// renderLabels renders name="value" pairs separated by commas.
func renderLabels(names, values []string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteString(`="`)
		b.WriteString(labelEscaper.Replace(values[i]))
		b.WriteByte('"')
	}
	return b.String()
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeHelp(s string) string { return helpEscaper.Replace(s) }

// formatFloat formats a sample value or bucket bound as Prometheus does.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, +1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
