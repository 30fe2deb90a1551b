// Package guestreport is the guest side of provisioning reports and the
// format of what the guest sends: a payload with reporting on carries
// Boothook, a cloud-init boothook that, once cloud-init's final stage has
// finished, writes one JSON line (Line) to the virtio-serial port Channel.
// Parse turns such a line into a Report. docs/guest-report.md describes the
// whole exchange.
package guestreport

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Channel is the virtio-serial target name of the report channel, in
// vmpayload's reverse-DNS namespace; the guest sees /dev/virtio-ports/Channel.
const Channel = "org.vmpayload.guest.0"

// Ack is what the host writes back on the channel after a report it
// accepted; the guest resends its report until it reads it.
const Ack = "ok\n"

// MaxLine bounds one report line (cloud-init's status and result documents
// with their error messages); longer lines are refused.
const MaxLine = 256 << 10

//go:embed reporter.sh
var boothook string

// Boothook is the reporter: a "#cloud-boothook" user-data part (POSIX sh).
func Boothook() string { return boothook }

// Statuses of a report, as cloud-init names them. StatusRunning is a
// report sent while cloud-init had not finished (its status --wait gave up).
const (
	StatusDone     = "done"
	StatusError    = "error"
	StatusDegraded = "degraded"
	StatusDisabled = "disabled"
	StatusRunning  = "running"
)

// Line is the JSON line the reporter writes. Status and Result are
// cloud-init's own documents (`cloud-init status --format json` and
// /run/cloud-init/result.json), passed on as they are.
type Line struct {
	Version          int             `json:"vmpayload_guest_report"`
	InstanceID       string          `json:"instance_id"`
	BootID           string          `json:"boot_id"`
	UptimeSeconds    float64         `json:"uptime_seconds"`
	CloudInitVersion string          `json:"cloud_init_version"`
	StatusExit       int             `json:"status_exit"`
	Status           json.RawMessage `json:"status"`
	Result           json.RawMessage `json:"result"`
}

// Report is what a line says, normalised across cloud-init versions.
type Report struct {
	// Status is done, error, degraded, disabled or running.
	Status string `json:"status"`
	// Errors are cloud-init's errors; RecoverableErrors its recoverable
	// errors (warnings and deprecations; cloud-init ≥ 23.4), each
	// "LEVEL: message".
	Errors            []string `json:"errors"`
	RecoverableErrors []string `json:"recoverable_errors"`
	InstanceID        string   `json:"instance_id"`
	Datasource        string   `json:"datasource,omitempty"`
	CloudInitVersion  string   `json:"cloud_init_version,omitempty"`
	BootID            string   `json:"boot_id,omitempty"`
	UptimeSeconds     float64  `json:"uptime_seconds"`
}

// ErrNotReport is wrapped for a line that is not a vmpayload report.
var ErrNotReport = errors.New("not a vmpayload guest report")

// status is the part of `cloud-init status --format json` used here; the
// fields exist on 22.4 unless noted.
type status struct {
	Status         string   `json:"status"`
	ExtendedStatus string   `json:"extended_status"` // ≥ 23.4
	Datasource     string   `json:"datasource"`
	Errors         []string `json:"errors"`
	// RecoverableErrors maps a level (WARNING, DEPRECATED, …) to messages
	// (≥ 23.4).
	RecoverableErrors map[string][]string `json:"recoverable_errors"`
}

type resultDoc struct {
	V1 struct {
		Datasource string   `json:"datasource"`
		Errors     []string `json:"errors"`
	} `json:"v1"`
}

// Parse reads one report line.
func Parse(b []byte) (Report, error) {
	var l Line
	if len(b) > MaxLine {
		return Report{}, fmt.Errorf("reading a guest report: %d bytes, more than %d: %w", len(b), MaxLine, ErrNotReport)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return Report{}, fmt.Errorf("reading a guest report: %w: %w", ErrNotReport, err)
	}
	if l.Version != 1 {
		return Report{}, fmt.Errorf("reading a guest report: vmpayload_guest_report is %d, want 1: %w", l.Version, ErrNotReport)
	}
	r := Report{InstanceID: l.InstanceID, BootID: l.BootID, UptimeSeconds: l.UptimeSeconds,
		CloudInitVersion: l.CloudInitVersion, Errors: []string{}, RecoverableErrors: []string{}}
	var st status
	if len(l.Status) > 0 && string(l.Status) != "null" {
		if err := json.Unmarshal(l.Status, &st); err != nil {
			return Report{}, fmt.Errorf("reading the cloud-init status of a guest report: %w", err)
		}
	}
	var res resultDoc
	if len(l.Result) > 0 && string(l.Result) != "null" {
		_ = json.Unmarshal(l.Result, &res) // optional: only the datasource is taken from it
	}
	r.Datasource = st.Datasource
	if r.Datasource == "" {
		r.Datasource = res.V1.Datasource
	}
	r.Errors = append(r.Errors, st.Errors...)
	if len(st.Errors) == 0 {
		r.Errors = append(r.Errors, res.V1.Errors...)
	}
	for _, lv := range slices.Sorted(maps.Keys(st.RecoverableErrors)) {
		for _, m := range st.RecoverableErrors[lv] {
			r.RecoverableErrors = append(r.RecoverableErrors, lv+": "+m)
		}
	}
	if st.Status == "" && len(r.Errors) == 0 {
		r.Errors = append(r.Errors, "the guest's cloud-init gave no status document")
	}
	r.Status = normalise(st, l.StatusExit, len(r.Errors), len(r.RecoverableErrors))
	return r, nil
}

// normalise maps cloud-init's status to one of the Status constants.
// cloud-init 22.4 says done/error/disabled/running; ≥ 23.4 adds
// extended_status "degraded done" (and exit code 2) when only recoverable
// errors occurred.
func normalise(st status, exit, nerr, nrec int) string {
	s := strings.ToLower(strings.TrimSpace(st.Status))
	switch {
	case s == "error" || nerr > 0:
		return StatusError
	case s == "disabled":
		return StatusDisabled
	case s == "running" || s == "not run" || s == "not started":
		return StatusRunning
	case s == "" && exit == 1:
		return StatusError
	case strings.HasPrefix(st.ExtendedStatus, "degraded") || exit == 2 || nrec > 0:
		return StatusDegraded
	case s == "done":
		return StatusDone
	}
	return StatusError
}
