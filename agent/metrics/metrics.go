// Package metrics defines the vmpayload agent's metrics and writes them in
// the Prometheus text exposition format 0.0.4 (served at /metrics; listed
// in docs/metrics.md).
//
// Defs is the one list of the metrics: name, type, help, label and the
// label values that exist from the start. Agent records them: one method
// per event, safe for concurrent use, and a nil *Agent records nothing, so
// the agent and its engine need no interface or nop implementation. Output
// is deterministic: families sorted by name, series by label values.
// Secrets never go into a metric: labels carry only the constant values
// below and libvirt call names.
package metrics

import (
	"io"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
)

// Prefix is prepended to every metric name.
const Prefix = "vmpayload_"

// ContentType is the HTTP content type of the exposition.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Label values. The outcomes of vmpayload_jobs_total are the final job
// states (result.StateDone, result.StateFailed) and the statuses of
// vmpayload_guest_reports_total the final guest statuses (result.Guest*).
const (
	SourceSpool  = result.SourceSpool  // a job dropped into the spool
	SourceSocket = result.SourceSocket // a job posted to the API

	ReasonUndefined  = "undefined"  // the domain was undefined
	ReasonOrphan     = "orphan"     // no domain refers to the image
	ReasonSuperseded = "superseded" // a newer payload replaced it
	ReasonDetach     = "detach"     // a detach job removed it
	ReasonUnattached = "unattached" // its job failed before the domain referenced it

	RecoveryReplace = "replace" // the payload drive was detached and attached again
	RecoveryReset   = "reset"   // the freshly started domain was reset

	DirPayload = "payload" // the payload directory
	DirSpool   = "spool"   // a spool subdirectory
	DirSocket  = "socket"  // the API socket (and its directory)

	// Areas of vmpayload_health_degraded: the areas of /healthz's
	// "degraded" reasons (agent/heal.go), in the order /healthz lists them.
	AreaResults    = "results"     // job results not written yet
	AreaSpool      = "spool"       // a spool directory cannot be recreated or watched
	AreaPayloadDir = "payload_dir" // the payload directory cannot be recreated or is not a directory
	AreaCleanup    = "cleanup"     // superseded or orphaned images could not be removed

	// Reasons of vmpayload_connections_refused_total: the cap a refused
	// API connection or /v1/events subscription met (agent.yaml
	// max_connections_per_uid, max_connections,
	// max_event_subscribers_per_uid, max_event_subscribers).
	RefusedPerUID            = "per_uid"
	RefusedTotal             = "total"
	RefusedSubscribersPerUID = "subscribers_per_uid"
	RefusedSubscribersTotal  = "subscribers_total"
)

// Areas are the values of vmpayload_health_degraded's area label, in the
// order /healthz lists its reasons.
var Areas = []string{AreaResults, AreaSpool, AreaPayloadDir, AreaCleanup}

// Indexes of Defs.
const (
	jobs = iota
	jobsReceived
	jobDuration
	build
	attach
	libvirtReconnects
	queueDepth
	jobsInFlight
	imagesRemoved
	jobRetries
	mediaRecoveries
	libvirtTimeouts
	resultRetries
	resultsPending
	dirsRecreated
	guestReports
	guestProvision
	libvirtConnected
	healthDegraded
	goroutines
	connsRefused
	apiConnections
	eventSubscribers
	numDefs
)

// durationBuckets span 5ms to 10 minutes: job phases that take
// milliseconds to minutes.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Defs are the agent's metrics.
var Defs = [numDefs]Def{
	jobs: {Name: "jobs_total", Type: Counter, Help: "Jobs finished, by outcome.",
		Labels: []string{"outcome"}, Values: []string{string(result.StateDone), string(result.StateFailed)}},
	jobsReceived: {Name: "jobs_received_total", Type: Counter, Help: "Jobs received, by intake source.",
		Labels: []string{"source"}, Values: []string{SourceSpool, SourceSocket}},
	jobDuration: {Name: "job_duration_seconds", Type: Histogram,
		Help: "Time from receiving a job to finishing it, in seconds.", Buckets: durationBuckets},
	build: {Name: "build_seconds", Type: Histogram,
		Help: "Time to build a payload image, in seconds.", Buckets: durationBuckets},
	attach: {Name: "attach_seconds", Type: Histogram,
		Help: "Time for libvirt define, device update and domain start, in seconds.", Buckets: durationBuckets},
	libvirtReconnects: {Name: "libvirt_reconnects_total", Type: Counter, Help: "Reconnections to libvirt."},
	queueDepth:        {Name: "queue_depth", Type: Gauge, Help: "Jobs waiting for a worker."},
	jobsInFlight:      {Name: "jobs_in_flight", Type: Gauge, Help: "Jobs being worked on."},
	imagesRemoved: {Name: "images_removed_total", Type: Counter, Help: "Payload images removed, by reason.",
		Labels: []string{"reason"}, Values: []string{ReasonUndefined, ReasonOrphan, ReasonSuperseded, ReasonDetach, ReasonUnattached}},
	jobRetries: {Name: "job_retries_total", Type: Counter, Help: "Job attempts retried after a transient failure."},
	mediaRecoveries: {Name: "media_recoveries_total", Type: Counter,
		Help:   "Live media changes that needed the payload drive replaced or the freshly started domain reset, by action.",
		Labels: []string{"action"}, Values: []string{RecoveryReplace, RecoveryReset}},
	libvirtTimeouts: {Name: "libvirt_timeouts_total", Type: Counter,
		Help: "libvirt calls that did not answer within libvirt_timeout, by call.", Labels: []string{"call"}},
	resultRetries: {Name: "result_write_retries_total", Type: Counter,
		Help: "Attempts to write a job result or retire its spool file again after a failure (e.g. a full spool file system)."},
	resultsPending: {Name: "results_pending", Type: Gauge,
		Help: "Finished jobs whose result is not written yet; retried with backoff."},
	dirsRecreated: {Name: "dirs_recreated_total", Type: Counter,
		Help:   "Directories (payload, spool) and the API socket (socket) recreated after they went missing.",
		Labels: []string{"dir"}, Values: []string{DirPayload, DirSpool, DirSocket}},
	guestReports: {Name: "guest_reports_total", Type: Counter,
		Help:   "Guest provisioning reports by final status (timeout: none within guest_timeout).",
		Labels: []string{"status"},
		Values: []string{result.GuestDone, result.GuestDegraded, result.GuestError, result.GuestDisabled, result.GuestTimeout}},
	guestProvision: {Name: "guest_provision_seconds", Type: Histogram,
		Help:    "Time from a domain's start to its guest's first provisioning report, in seconds.",
		Buckets: []float64{5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1800, 3600}},
	libvirtConnected: {Name: "libvirt_connected", Type: Gauge,
		Help: "1 while the agent's libvirt connection is up, 0 while it is down (the agent reconnects by itself)."},
	healthDegraded: {Name: "health_degraded", Type: Gauge,
		Help:   "1 while /healthz reports the agent degraded for a reason in the area, else 0.",
		Labels: []string{"area"}, Values: Areas},
	goroutines: {Name: "goroutines", Type: Gauge, Help: "Goroutines of the agent process."},
	connsRefused: {Name: "connections_refused_total", Type: Counter,
		Help:   "API connections and /v1/events subscriptions refused over a cap, by the cap (per_uid, total, subscribers_per_uid, subscribers_total).",
		Labels: []string{"reason"}, Values: []string{RefusedPerUID, RefusedTotal, RefusedSubscribersPerUID, RefusedSubscribersTotal}},
	apiConnections:   {Name: "api_connections", Type: Gauge, Help: "API connections open (admitted within max_connections)."},
	eventSubscribers: {Name: "event_subscribers", Type: Gauge, Help: "Open /v1/events streams (within max_event_subscribers)."},
}

// Agent records the agent's metrics (Defs). Create it with New; a nil
// *Agent records nothing and writes an empty exposition.
type Agent struct {
	reg registry // in Defs order
}

// New returns the agent's metrics, every series at 0.
func New() *Agent { return &Agent{reg: newRegistry(Defs[:]...)} }

// WriteTo writes the exposition (io.WriterTo).
func (a *Agent) WriteTo(w io.Writer) (int64, error) {
	if a == nil {
		return 0, nil
	}
	return a.reg.WriteTo(w)
}

func (a *Agent) inc(i int, labels ...string) {
	if a != nil {
		a.reg[i].with(labels...).inc()
	}
}

func (a *Agent) set(i int, v float64) {
	if a != nil {
		a.reg[i].with().set(v)
	}
}

func (a *Agent) observe(i int, seconds float64) {
	if a != nil {
		a.reg[i].with().observe(seconds)
	}
}

// SetLibvirtReconnects sets the function vmpayload_libvirt_reconnects_total
// reads at exposition time (libvirtx.Host.Reconnects).
func (a *Agent) SetLibvirtReconnects(fn func() uint64) {
	if a == nil || fn == nil {
		return
	}
	a.reg[libvirtReconnects].setFunc(func() float64 { return float64(fn()) })
}

// SetLibvirtConnected sets the function vmpayload_libvirt_connected reads
// at exposition time (1 when it returns true).
func (a *Agent) SetLibvirtConnected(fn func() bool) {
	if a == nil || fn == nil {
		return
	}
	a.reg[libvirtConnected].setFunc(func() float64 {
		if fn() {
			return 1
		}
		return 0
	})
}

// SetDegraded sets the function vmpayload_health_degraded reads at
// exposition time: it returns the areas (Area*) /healthz reports degraded
// now; their series are 1, the others 0.
func (a *Agent) SetDegraded(fn func() []string) {
	if a == nil || fn == nil {
		return
	}
	a.reg[healthDegraded].setValuesFunc(func() map[string]float64 {
		m := map[string]float64{}
		for _, area := range fn() {
			m[area] = 1
		}
		return m
	})
}

// SetGoroutines sets the function vmpayload_goroutines reads at exposition
// time (runtime.NumGoroutine in the daemon).
func (a *Agent) SetGoroutines(fn func() int) {
	if a == nil || fn == nil {
		return
	}
	a.reg[goroutines].setFunc(func() float64 { return float64(fn()) })
}

// SetConnections sets the function vmpayload_api_connections and
// vmpayload_event_subscribers read at exposition time: the API's open
// connections and event streams.
func (a *Agent) SetConnections(fn func() (conns, subscribers int)) {
	if a == nil || fn == nil {
		return
	}
	a.reg[apiConnections].setFunc(func() float64 { c, _ := fn(); return float64(c) })
	a.reg[eventSubscribers].setFunc(func() float64 { _, s := fn(); return float64(s) })
}

// ConnectionRefused counts an API connection or event subscription refused
// over a cap (Refused*).
func (a *Agent) ConnectionRefused(reason string) { a.inc(connsRefused, reason) }

// JobReceived counts a job received from source (SourceSpool or
// SourceSocket).
func (a *Agent) JobReceived(source string) { a.inc(jobsReceived, source) }

// JobFinished counts a job that reached its final state and records the
// time d from its receipt.
func (a *Agent) JobFinished(state result.State, d time.Duration) {
	a.inc(jobs, string(state))
	a.observe(jobDuration, d.Seconds())
}

// BuildDone records the time d a payload image build took.
func (a *Agent) BuildDone(d time.Duration) { a.observe(build, d.Seconds()) }

// AttachDone records the time d libvirt define, device update and start
// took.
func (a *Agent) AttachDone(d time.Duration) { a.observe(attach, d.Seconds()) }

// QueueDepth sets the number of jobs waiting for a worker.
func (a *Agent) QueueDepth(n int) { a.set(queueDepth, float64(n)) }

// InFlight sets the number of jobs being worked on.
func (a *Agent) InFlight(n int) { a.set(jobsInFlight, float64(n)) }

// ImageRemoved counts a payload image removed for reason (Reason*).
func (a *Agent) ImageRemoved(reason string) { a.inc(imagesRemoved, reason) }

// Retry counts a job attempt retried after a transient failure.
func (a *Agent) Retry() { a.inc(jobRetries) }

// MediaRecovery counts a live media change that needed action
// (RecoveryReplace or RecoveryReset) to go through.
func (a *Agent) MediaRecovery(action string) { a.inc(mediaRecoveries, action) }

// LibvirtTimeout counts a libvirt call that did not answer within
// libvirt_timeout (call as in libvirtx.TimeoutError.Call).
func (a *Agent) LibvirtTimeout(call string) { a.inc(libvirtTimeouts, call) }

// ResultRetry counts an attempt to write a result (or retire its spool
// file) again after a failure.
func (a *Agent) ResultRetry() { a.inc(resultRetries) }

// ResultsPending sets the number of finished jobs whose result is not
// written yet.
func (a *Agent) ResultsPending(n int) { a.set(resultsPending, float64(n)) }

// DirRecreated counts a directory or the API socket recreated after it
// went missing (DirPayload, DirSpool or DirSocket).
func (a *Agent) DirRecreated(dir string) { a.inc(dirsRecreated, dir) }

// GuestReport counts a guest's final status (result.Guest*) and, when
// seconds is not negative, records its provisioning time: from the
// domain's start to the first report.
func (a *Agent) GuestReport(status string, seconds float64) {
	a.inc(guestReports, status)
	if seconds >= 0 {
		a.observe(guestProvision, seconds)
	}
}
