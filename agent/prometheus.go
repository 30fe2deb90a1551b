package agent

import (
	"io"
	"time"

	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/libvirtx"
)

// Prometheus records the agent's metrics in a metrics.Agent registry.
type Prometheus struct {
	M *metrics.Agent
}

// NewPrometheus returns Metrics backed by a new registry; the reconnect
// counter reads host.Reconnects.
func NewPrometheus(host libvirtx.Host) *Prometheus {
	m := metrics.NewAgent()
	if host != nil {
		m.SetLibvirtReconnects(host.Reconnects)
	}
	return &Prometheus{M: m}
}

// Write writes the Prometheus text exposition.
func (p *Prometheus) Write(w io.Writer) { _, _ = p.M.Registry.WriteTo(w) }

// BuildDone implements Metrics.
func (p *Prometheus) BuildDone(d time.Duration) { p.M.Build.ObserveDuration(d) }

// AttachDone implements Metrics.
func (p *Prometheus) AttachDone(d time.Duration) { p.M.Attach.ObserveDuration(d) }

// ImageRemoved implements Metrics.
func (p *Prometheus) ImageRemoved(reason string) { p.M.ImagesRemoved.With(reason).Inc() }

// MediaRecovery implements Metrics.
func (p *Prometheus) MediaRecovery(action string) { p.M.MediaRecoveries.With(action).Inc() }

// Retry implements Metrics.
func (p *Prometheus) Retry() { p.M.JobRetries.Inc() }

// JobReceived implements Metrics.
func (p *Prometheus) JobReceived(source string) { p.M.JobReceived(source) }

// JobFinished implements Metrics.
func (p *Prometheus) JobFinished(outcome string, d time.Duration) {
	p.M.Jobs.With(outcome).Inc()
	p.M.JobDuration.ObserveDuration(d)
}

// QueueDepth implements Metrics.
func (p *Prometheus) QueueDepth(n int) { p.M.QueueDepth.Set(float64(n)) }

// InFlight implements Metrics.
func (p *Prometheus) InFlight(n int) { p.M.JobsInFlight.Set(float64(n)) }

// LibvirtTimeout implements Metrics.
func (p *Prometheus) LibvirtTimeout(call string) { p.M.LibvirtTimeouts.With(call).Inc() }

// ResultRetry implements Metrics.
func (p *Prometheus) ResultRetry() { p.M.ResultRetries.Inc() }

// ResultsPending implements Metrics.
func (p *Prometheus) ResultsPending(n int) { p.M.ResultsPending.Set(float64(n)) }

// DirRecreated implements Metrics.
func (p *Prometheus) DirRecreated(dir string) { p.M.DirsRecreated.With(dir).Inc() }

// GuestReport implements GuestMetrics.
func (p *Prometheus) GuestReport(status string, seconds float64) { p.M.GuestReport(status, seconds) }
