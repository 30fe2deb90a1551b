// The registry and text writer here are the package's own rather than
// github.com/prometheus/client_golang's, which was tried (issue 33) and does
// worse here: docs/benchmarks.md says why.

package metrics

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Type is the Prometheus type of a metric family.
type Type string

// The metric types the package writes.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Def defines one metric family.
type Def struct {
	// Name is the metric name without Prefix.
	Name string
	Type Type
	// Help is the HELP text (escaped when written).
	Help string
	// Labels are the label names; none: the family is one series.
	Labels []string
	// Values, for a family with one label, are the label values whose
	// series exist (at 0) from the start, so dashboards see them before the
	// first event.
	Values []string
	// Buckets are a histogram's bucket upper bounds, finite and strictly
	// increasing (+Inf is implied).
	Buckets []float64
}

var (
	nameRe  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelRe = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// family is a metric family and its series. Recording is lock-free
// (atomics) except for the first use of a new label combination.
type family struct {
	Def
	name  string    // Prefix + Name
	upper []float64 // histogram bucket bounds without +Inf
	les   []string  // rendered le values, "+Inf" last
	fn    atomic.Pointer[func() float64]
	// vfn, of a family with one label and preset Values, gives each
	// value's sample at exposition time (missing: 0).
	vfn atomic.Pointer[func() map[string]float64]

	mu     sync.RWMutex
	series map[string]*series
}

// series is one labelled series of a family.
type series struct {
	values []string
	labels string          // rendered label pairs without braces
	v      atomic.Uint64   // counter: the count; gauge: math.Float64bits
	upper  []float64       // histogram: the family's bucket bounds
	counts []atomic.Uint64 // histogram: per bucket, not cumulative; last is +Inf
	sum    atomic.Uint64   // histogram: math.Float64bits of the sum
}

// newFamily checks d and returns its family; an invalid Def is a
// programming error and panics.
func newFamily(d Def) *family {
	f := &family{Def: d, name: Prefix + d.Name, series: map[string]*series{}}
	bad := func(format string, args ...any) {
		panic(fmt.Sprintf("metrics: %s: ", f.name) + fmt.Sprintf(format, args...))
	}
	if !nameRe.MatchString(f.name) {
		bad("invalid metric name")
	}
	if d.Type != Counter && d.Type != Gauge && d.Type != Histogram {
		bad("unknown type %q", d.Type)
	}
	for i, l := range d.Labels {
		if !labelRe.MatchString(l) || strings.HasPrefix(l, "__") || d.Type == Histogram && l == "le" || slices.Contains(d.Labels[:i], l) {
			bad("invalid or repeated label name %q", l)
		}
	}
	if len(d.Values) > 0 && len(d.Labels) != 1 {
		bad("preset label values need exactly one label, not %v", d.Labels)
	}
	if d.Type != Histogram && d.Buckets != nil {
		bad("buckets on a %s", d.Type)
	}
	if d.Type == Histogram {
		f.upper = slices.Clone(d.Buckets)
		if n := len(f.upper); n > 0 && math.IsInf(f.upper[n-1], +1) {
			f.upper = f.upper[:n-1]
		}
		for i, u := range f.upper {
			if math.IsNaN(u) || math.IsInf(u, 0) || i > 0 && u <= f.upper[i-1] {
				bad("buckets must be finite and strictly increasing: %v", d.Buckets)
			}
			f.les = append(f.les, formatFloat(u))
		}
		f.les = append(f.les, "+Inf")
	}
	if len(d.Labels) == 0 {
		f.with()
	}
	for _, v := range d.Values {
		f.with(v)
	}
	return f
}

// with returns the series for the label values (one per label, in order),
// creating it at 0 on first use. A wrong number of values panics.
func (f *family) with(values ...string) *series {
	if len(values) != len(f.Labels) {
		panic(fmt.Sprintf("metrics: %s: %d label values for labels %v", f.name, len(values), f.Labels))
	}
	key := strings.Join(values, "\xff")
	f.mu.RLock()
	s := f.series[key]
	f.mu.RUnlock()
	if s != nil {
		return s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s = f.series[key]; s == nil {
		s = &series{values: slices.Clone(values), labels: renderLabels(f.Labels, values)}
		if f.Type == Histogram {
			s.upper, s.counts = f.upper, make([]atomic.Uint64, len(f.upper)+1)
		}
		f.series[key] = s
	}
	return s
}

// setFunc makes an unlabelled counter or gauge read its value from fn at
// exposition time.
func (f *family) setFunc(fn func() float64) { f.fn.Store(&fn) }

// setValuesFunc makes a gauge with one label and preset Values read its
// samples from fn at exposition time, one per preset value (a value fn
// leaves out is 0; one it adds is ignored). A family without preset values
// is a programming error and panics.
func (f *family) setValuesFunc(fn func() map[string]float64) {
	if len(f.Values) == 0 || f.Type != Gauge {
		panic(fmt.Sprintf("metrics: %s: setValuesFunc needs a gauge with preset label values", f.name))
	}
	f.vfn.Store(&fn)
}

// inc adds 1 to a counter.
func (s *series) inc() { s.v.Add(1) }

// set sets a gauge.
func (s *series) set(v float64) { s.v.Store(math.Float64bits(v)) }

// observe records one value in a histogram.
func (s *series) observe(v float64) {
	s.counts[sort.SearchFloat64s(s.upper, v)].Add(1) // first bucket with upper >= v
	for {
		old := s.sum.Load()
		if s.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// write appends the family's HELP, TYPE and sample lines to b; series are
// sorted by label values.
func (f *family) write(b *bytes.Buffer) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", f.name, helpEscaper.Replace(f.Help), f.name, f.Type)
	if fn := f.fn.Load(); fn != nil {
		writeSample(b, f.name, "", formatFloat((*fn)()))
		return
	}
	if fn := f.vfn.Load(); fn != nil {
		vals := (*fn)()
		for _, v := range slices.Sorted(slices.Values(f.Values)) {
			writeSample(b, f.name, renderLabels(f.Labels, []string{v}), formatFloat(vals[v]))
		}
		return
	}
	f.mu.RLock()
	all := slices.Collect(maps.Values(f.series))
	f.mu.RUnlock()
	sort.Slice(all, func(i, j int) bool { return slices.Compare(all[i].values, all[j].values) < 0 })
	for _, s := range all {
		switch f.Type {
		case Counter:
			writeSample(b, f.name, s.labels, strconv.FormatUint(s.v.Load(), 10))
		case Gauge:
			writeSample(b, f.name, s.labels, formatFloat(math.Float64frombits(s.v.Load())))
		case Histogram:
			// Buckets are read once; _count is their total, so the +Inf
			// bucket and _count always agree. _sum may lag or lead by
			// concurrent observations.
			prefix := s.labels
			if prefix != "" {
				prefix += ","
			}
			var cum uint64
			for i, le := range f.les {
				cum += s.counts[i].Load()
				writeSample(b, f.name+"_bucket", prefix+`le="`+le+`"`, strconv.FormatUint(cum, 10))
			}
			writeSample(b, f.name+"_sum", s.labels, formatFloat(math.Float64frombits(s.sum.Load())))
			writeSample(b, f.name+"_count", s.labels, strconv.FormatUint(cum, 10))
		}
	}
}

// registry is a set of families written in name order.
type registry []*family

// newRegistry returns the families of defs; a repeated name panics.
func newRegistry(defs ...Def) registry {
	r := make(registry, 0, len(defs))
	for _, d := range defs {
		f := newFamily(d)
		if slices.ContainsFunc(r, func(o *family) bool { return o.name == f.name }) {
			panic(fmt.Sprintf("metrics: metric %s defined twice", f.name))
		}
		r = append(r, f)
	}
	return r
}

// WriteTo writes every family in the Prometheus text format 0.0.4, sorted
// by name.
func (r registry) WriteTo(w io.Writer) (int64, error) {
	sorted := slices.Clone(r)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	var b bytes.Buffer
	for _, f := range sorted {
		f.write(&b)
	}
	n, err := w.Write(b.Bytes())
	if err != nil {
		return int64(n), fmt.Errorf("metrics: write exposition: %w", err)
	}
	return int64(n), nil
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
	pairs := make([]string, len(names))
	for i, n := range names {
		pairs[i] = n + `="` + labelEscaper.Replace(values[i]) + `"`
	}
	return strings.Join(pairs, ",")
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// formatFloat formats a sample value or bucket bound as Prometheus does
// (strconv writes +Inf, -Inf and NaN as it does).
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
