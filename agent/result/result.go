// Package result defines the result document of a job: the same JSON in the
// spool's done/ and failed/ directories and in the socket API.
package result

import (
	"time"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// State is where a job is in its life.
type State string

// Job states. Only StateDone and StateFailed are final.
const (
	StateQueued  State = "queued"
	StateRunning State = "running"
	StateDone    State = "done"
	StateFailed  State = "failed"
)

// Where a job came from, in Result.Source (and the source label of
// vmpayload_jobs_received_total).
const (
	SourceSpool  = "spool"  // a job file dropped into the spool
	SourceSocket = "socket" // a job posted to the API
)

// Final reports whether s is a final state.
func (s State) Final() bool { return s == StateDone || s == StateFailed }

// Error codes of failed jobs, in Error.Code. Validation problems use
// CodeInvalidJob with the job package's per-field errors in Result.Errors.
const (
	CodeInvalidJob     = "invalid_job"      // the job document failed validation
	CodeDomainNotFound = "domain_not_found" // no such domain and no domain_xml to define it
	CodeDomainRunning  = "domain_running"   // running domain without a payload drive and no SCSI bus to hot-plug one
	CodeDefineFailed   = "define_failed"    // libvirt refused domain_xml
	CodePrebuiltImage  = "prebuilt_image"   // prebuilt_image missing, unreadable or not a cloud-init seed
	CodeIO             = "io_error"         // a filesystem error writing the image (e.g. disk full)
	CodeLibvirt        = "libvirt_error"    // libvirt refused an operation
	CodeMediaLocked    = "media_locked"     // the guest kept the payload drive's tray locked (a mounted CD-ROM): no live media change
	CodeUnsupported    = "unsupported"      // the hypervisor driver cannot do what the job needs
	CodeBadFile        = "bad_file"         // the spool file is not a regular file, or unreadable
	CodeShutdown       = "shutdown"         // never written: jobs interrupted by shutdown are re-run
	CodeInternal       = "internal"         // a bug
	CodeForbidden      = "forbidden"        // the submitter may not use a field of the job (docs/security.md)
	CodeLibvirtTimeout = "libvirt_timeout"  // a libvirt call did not answer within libvirt_timeout
)

// TakesEffectNextColdStart is Result.TakesEffect of a job done on a
// running domain that the guest sees only after the domain is shut down
// and started again: a reboot inside the guest, or `virsh reboot`, keeps
// the running QEMU and what it read when it started.
const TakesEffectNextColdStart = "next_cold_start"

// Error is the main error of a failed job.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Payload describes the image attached to the domain.
type Payload struct {
	payload.Image
	// Reused is true when an identical image already existed and was kept.
	Reused bool `json:"reused"`
	// Prebuilt is true for a job's prebuilt_image.
	Prebuilt bool `json:"prebuilt,omitempty"`
}

// Device is the payload drive in the domain (a CD-ROM or a read-only disk).
type Device struct {
	Bus    string `json:"bus"`
	Target string `json:"target"`
	// Kind is "cdrom" (ISO payloads) or "disk" (vfat payloads, which
	// Linux cannot mount from a CD-ROM).
	Kind string `json:"kind,omitempty"`
}

// Submitter identifies who submitted a job, for audit and for the access
// policy (agent/access).
type Submitter struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// User is the user name of UID, when the user database knows it.
	User string `json:"user,omitempty"`
	// PID is the API client's process id (SO_PEERCRED); 0 for spool jobs.
	PID int32 `json:"pid,omitempty"`
	// Via is how the identity was learned: "peercred" (socket) or
	// "file_owner" (spool).
	Via string `json:"via"`
}

// Result is a job's outcome (or, in the API, its current state).
type Result struct {
	ID          string           `json:"id"`
	Domain      string           `json:"domain"`
	DomainUUID  string           `json:"domain_uuid"`
	Action      string           `json:"action"`
	State       State            `json:"state"`
	Payload     *Payload         `json:"payload"`
	Device      *Device          `json:"device"`
	DomainState string           `json:"domain_state"`
	Error       *Error           `json:"error"`
	Errors      []job.FieldError `json:"errors"`
	Source      string           `json:"source,omitempty"`
	// Submitter is who submitted the job: the API peer's credentials or
	// the spool file's owner. Absent in results of older versions.
	Submitter  *Submitter `json:"submitter,omitempty"`
	Attempts   int        `json:"attempts,omitempty"`
	ReceivedAt time.Time  `json:"received_at"`
	FinishedAt *time.Time `json:"finished_at"`
	DurationMS int64      `json:"duration_ms"`
	// FwCfg lists the fw_cfg entries the payload was given to the domain
	// as (an Ignition config delivered by fw_cfg: there is no drive, and
	// Device is null).
	FwCfg []string `json:"fw_cfg,omitempty"`
	// Credentials lists the names (never the values) of the systemd
	// credentials a job of format "credentials" gave the domain, by
	// SMBIOS OEM strings or fw_cfg files (docs/credentials.md).
	Credentials []string `json:"credentials,omitempty"`
	// TakesEffect is TakesEffectNextColdStart when the job could change
	// only the domain's persistent definition, not what the running guest
	// sees (fw_cfg, which QEMU reads when it starts); Notice says so in
	// words. Absent when the guest sees the change now.
	TakesEffect string `json:"takes_effect,omitempty"`
	// Notice says in words what the job could not do for the guest: a
	// fw_cfg change that waits for a cold start, and that Ignition
	// applies a config only on a first boot when the domain has run
	// before (docs/ignition.md).
	Notice string `json:"notice,omitempty"`
	// Guest is the guest's provisioning report, for jobs that gave the
	// domain the report channel (docs/guest-report.md); the result file is
	// replaced once more when it becomes final.
	Guest *Guest `json:"guest,omitempty"`
	// Claim ties a result to one claim of a spool file, so that a job found
	// in processing/ after a crash is not run twice.
	Claim string `json:"claim,omitempty"`
}

// Fail marks r failed with the given code and message.
func (r *Result) Fail(code, msg, field string) {
	r.State = StateFailed
	r.Error = &Error{Code: code, Message: msg, Field: field}
}

// Finish stamps the finish time and duration.
func (r *Result) Finish(now time.Time) {
	t := now.UTC()
	r.FinishedAt = &t
	if !r.ReceivedAt.IsZero() {
		r.DurationMS = now.Sub(r.ReceivedAt).Milliseconds()
	}
}
