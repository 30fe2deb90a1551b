package metrics

import "time"

// Label values of the Agent metrics.
const (
	OutcomeDone   = "done"
	OutcomeFailed = "failed"

	SourceSpool  = "spool"
	SourceSocket = "socket"

	ReasonUndefined  = "undefined"  // the domain was undefined
	ReasonOrphan     = "orphan"     // no domain refers to the image
	ReasonSuperseded = "superseded" // a newer payload replaced it
	ReasonDetach     = "detach"     // a detach job removed it
	ReasonUnattached = "unattached" // its job failed before the domain referenced it

	DirPayload = "payload" // the payload directory
	DirSpool   = "spool"   // a spool subdirectory
	DirSocket  = "socket"  // the API socket (and its directory)

	RecoveryReplace = "replace" // the payload drive was detached and attached again
	RecoveryReset   = "reset"   // the freshly started domain was reset
)

// GuestStatuses are the label values of vmpayload_guest_reports_total: the
// final statuses of a job's guest section (docs/guest-report.md).
var GuestStatuses = []string{"done", "degraded", "error", "disabled", "timeout"}

// GuestBuckets are the bucket bounds in seconds of the provisioning-time
// histogram: a domain's start to its guest's first report, from 5 seconds
// to an hour.
func GuestBuckets() []float64 {
	return []float64{5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1800, 3600}
}

// DurationBuckets are histogram bucket bounds in seconds from 5ms to 10
// minutes, for job phases that take milliseconds to minutes.
func DurationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
}

// Agent holds the metrics the vmpayload agent records, registered in
// Registry. Labelled series with known label values exist from the start
// (at 0), so dashboards see them before the first event.
type Agent struct {
	// Registry is where all the metrics below are registered; serve it with
	// Registry.Handler or Registry.WriteTo.
	Registry *Registry

	// Jobs is vmpayload_jobs_total{outcome="done|failed"}.
	Jobs *CounterVec
	// JobsReceived is vmpayload_jobs_received_total{source="spool|socket"}.
	JobsReceived *CounterVec
	// JobDuration is vmpayload_job_duration_seconds, from receipt to finish.
	JobDuration *Histogram
	// Build is vmpayload_build_seconds, payload image builds.
	Build *Histogram
	// Attach is vmpayload_attach_seconds, libvirt define/update/start.
	Attach *Histogram
	// LibvirtReconnects is vmpayload_libvirt_reconnects_total, read from the
	// function given to SetLibvirtReconnects.
	LibvirtReconnects *Func
	// QueueDepth is vmpayload_queue_depth, jobs waiting for a worker.
	QueueDepth *Gauge
	// JobsInFlight is vmpayload_jobs_in_flight, jobs being worked on.
	JobsInFlight *Gauge
	// ImagesRemoved is vmpayload_images_removed_total{reason=...} with
	// reasons undefined, orphan, superseded, detach and unattached.
	ImagesRemoved *CounterVec
	// JobRetries is vmpayload_job_retries_total.
	JobRetries *Counter
	// MediaRecoveries is vmpayload_media_recoveries_total{action=...}: live
	// media changes that needed the payload drive replaced ("replace") or
	// the freshly started domain reset ("reset") to go through.
	MediaRecoveries *CounterVec
	// LibvirtTimeouts is vmpayload_libvirt_timeouts_total{call=...}: libvirt
	// calls that did not answer within libvirt_timeout, by Host method
	// (libvirtx.TimeoutError.Call).
	LibvirtTimeouts *CounterVec
	// ResultRetries is vmpayload_result_write_retries_total: attempts to
	// write a job's result (or retire its spool file) again after a failure
	// such as a full spool file system.
	ResultRetries *Counter
	// ResultsPending is vmpayload_results_pending: finished jobs whose
	// result is not written yet (the agent retries them with backoff).
	ResultsPending *Gauge
	// DirsRecreated is vmpayload_dirs_recreated_total{dir=...}: directories
	// (payload, spool) and the API socket (socket) the agent recreated after
	// they went missing.
	DirsRecreated *CounterVec
	// GuestReports is vmpayload_guest_reports_total{status=...}: guest
	// reports by final status (GuestStatuses; timeout: none came in time).
	GuestReports *CounterVec
	// GuestProvision is vmpayload_guest_provision_seconds: from a domain's
	// start to its guest's first report.
	GuestProvision *Histogram
}

// NewAgent returns the agent's metrics in a new registry.
func NewAgent() *Agent {
	r := NewRegistry()
	a := &Agent{
		Registry:     r,
		Jobs:         r.CounterVec("jobs_total", "Jobs finished, by outcome.", "outcome"),
		JobsReceived: r.CounterVec("jobs_received_total", "Jobs received, by intake source.", "source"),
		JobDuration: r.Histogram("job_duration_seconds",
			"Time from receiving a job to finishing it, in seconds.", DurationBuckets()),
		Build: r.Histogram("build_seconds", "Time to build a payload image, in seconds.", DurationBuckets()),
		Attach: r.Histogram("attach_seconds",
			"Time for libvirt define, device update and domain start, in seconds.", DurationBuckets()),
		LibvirtReconnects: r.CounterFunc("libvirt_reconnects_total", "Reconnections to libvirt.", nil),
		QueueDepth:        r.Gauge("queue_depth", "Jobs waiting for a worker."),
		JobsInFlight:      r.Gauge("jobs_in_flight", "Jobs being worked on."),
		ImagesRemoved: r.CounterVec("images_removed_total",
			"Payload images removed, by reason.", "reason"),
		JobRetries: r.Counter("job_retries_total", "Job attempts retried after a transient failure."),
		MediaRecoveries: r.CounterVec("media_recoveries_total",
			"Live media changes that needed the payload drive replaced or the freshly started domain reset, by action.", "action"),
		LibvirtTimeouts: r.CounterVec("libvirt_timeouts_total",
			"libvirt calls that did not answer within libvirt_timeout, by call.", "call"),
		ResultRetries: r.Counter("result_write_retries_total",
			"Attempts to write a job result or retire its spool file again after a failure (e.g. a full spool file system)."),
		ResultsPending: r.Gauge("results_pending", "Finished jobs whose result is not written yet; retried with backoff."),
		DirsRecreated: r.CounterVec("dirs_recreated_total",
			"Directories (payload, spool) and the API socket (socket) recreated after they went missing.", "dir"),
		GuestReports: r.CounterVec("guest_reports_total",
			"Guest provisioning reports by final status (timeout: none within guest_timeout).", "status"),
		GuestProvision: r.Histogram("guest_provision_seconds",
			"Time from a domain's start to its guest's first provisioning report, in seconds.", GuestBuckets()),
	}
	for _, st := range GuestStatuses {
		a.GuestReports.With(st)
	}
	for _, d := range []string{DirPayload, DirSpool, DirSocket} {
		a.DirsRecreated.With(d)
	}
	for _, act := range []string{RecoveryReplace, RecoveryReset} {
		a.MediaRecoveries.With(act)
	}
	for _, o := range []string{OutcomeDone, OutcomeFailed} {
		a.Jobs.With(o)
	}
	for _, s := range []string{SourceSpool, SourceSocket} {
		a.JobsReceived.With(s)
	}
	for _, reason := range []string{ReasonUndefined, ReasonOrphan, ReasonSuperseded, ReasonDetach, ReasonUnattached} {
		a.ImagesRemoved.With(reason)
	}
	return a
}

// SetLibvirtReconnects sets the function vmpayload_libvirt_reconnects_total
// reads (for example the libvirt connection's reconnect count).
func (a *Agent) SetLibvirtReconnects(fn func() uint64) {
	if fn == nil {
		a.LibvirtReconnects.Set(nil)
		return
	}
	a.LibvirtReconnects.Set(func() float64 { return float64(fn()) })
}

// JobReceived counts a job received from source (SourceSpool or
// SourceSocket).
func (a *Agent) JobReceived(source string) { a.JobsReceived.With(source).Inc() }

// JobFinished counts a finished job with outcome (OutcomeDone or
// OutcomeFailed) and records the time since it was received.
func (a *Agent) JobFinished(outcome string, received time.Time) {
	a.Jobs.With(outcome).Inc()
	a.JobDuration.Since(received)
}

// ImageRemoved counts a payload image removed for reason (ReasonUndefined,
// ReasonOrphan, ReasonSuperseded or ReasonDetach).
func (a *Agent) ImageRemoved(reason string) { a.ImagesRemoved.With(reason).Inc() }

// GuestReport counts a guest report with its final status and, when seconds
// is not negative, records the provisioning time.
func (a *Agent) GuestReport(status string, seconds float64) {
	a.GuestReports.With(status).Inc()
	if seconds >= 0 {
		a.GuestProvision.Observe(seconds)
	}
}
