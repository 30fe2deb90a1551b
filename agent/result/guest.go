package result

import "time"

// Guest statuses (Guest.Status). GuestPending: the domain has the report
// channel and no report came yet; the others are final except
// GuestRunning (a report sent before cloud-init had finished).
const (
	GuestPending  = "pending"
	GuestDone     = "done"
	GuestError    = "error"
	GuestDegraded = "degraded"
	GuestDisabled = "disabled"
	GuestRunning  = "running"
	GuestTimeout  = "timeout"
)

// GuestFinal reports whether a guest status is final.
func GuestFinal(s string) bool { return s != GuestPending && s != GuestRunning && s != "" }

// Guest is the guest's provisioning report (docs/guest-report.md): what
// cloud-init in the guest said over the report channel once its final stage
// had finished, or why nothing came.
type Guest struct {
	// Status is pending, done, error, degraded, disabled, running or
	// timeout.
	Status string `json:"status"`
	// Channel is the virtio-serial name the guest writes to.
	Channel string `json:"channel"`
	// InstanceID is the instance-id the guest's cloud-init used; when it
	// is not the payload's, InstanceIDMismatch is set: the guest did not
	// take this payload (another datasource, or a stale one).
	InstanceID         string `json:"instance_id,omitempty"`
	InstanceIDMismatch bool   `json:"instance_id_mismatch,omitempty"`
	// Errors and RecoverableErrors are cloud-init's messages.
	Errors            []string `json:"errors"`
	RecoverableErrors []string `json:"recoverable_errors"`
	Datasource        string   `json:"datasource,omitempty"`
	CloudInitVersion  string   `json:"cloud_init_version,omitempty"`
	// BootID is the guest kernel's boot id of the latest report; Reports
	// counts reports (one per boot).
	BootID  string `json:"boot_id,omitempty"`
	Reports int    `json:"reports"`
	// UptimeSeconds is the guest's uptime when it reported.
	UptimeSeconds float64 `json:"uptime_seconds,omitempty"`
	// StartedAt is when the agent saw the domain start with the channel
	// (the clock of guest_timeout); ReportedAt when the latest report
	// came; Seconds is the time between them for the first report.
	StartedAt  *time.Time `json:"started_at,omitempty"`
	ReportedAt *time.Time `json:"reported_at,omitempty"`
	Seconds    float64    `json:"seconds,omitempty"`
	// Detail says more about a status the guest did not send (timeout).
	Detail string `json:"detail,omitempty"`
}
