// Package cloudbase is the payload kind of a Windows guest (guest_os
// "windows") that cloudbase-init provisions from a cloud-init image: a
// config drive (format "configdrive", its ConfigDriveService) or a NoCloud
// seed. It shares the images of package cloudinit and has checks of its
// own: the fields cloudbase-init cannot honour, the administrator's fields
// only it reads.
package cloudbase

import (
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

func init() { kinds.RegisterCheck(kinds.Windows, check{}) }

type check struct{}

// Check checks guest_os and the fields only a Windows guest may give,
// and, for a Windows guest, refuses every field cloudbase-init cannot
// honour, then checks the fields it reads (job.CheckWindowsFields).
func (check) Check(j *job.Job, r *job.Report) {
	switch j.GuestOS {
	case "", job.GuestLinux, job.GuestWindows:
	default:
		r.Add("guest_os", job.CodeInvalid, "%s is not a guest operating system; use \"linux\" (the default) or \"windows\"", job.Quote(string(j.GuestOS)))
		return
	}
	if !reads(j.Format) {
		// another Windows payload (format "sysprep", an answer file
		// Windows Setup reads) checks its own fields, these included
		return
	}
	adminFields := []struct {
		name string
		set  bool
	}{
		{"admin_username", j.AdminUsername != ""}, {"admin_password_secret", j.AdminPasswordSecret != ""}, {"admin_certs", len(j.AdminCerts) > 0},
	}
	if j.GuestOS != job.GuestWindows {
		for _, f := range adminFields {
			if f.set {
				r.Add(f.name, job.CodeConflict, "%s is read by cloudbase-init: it needs guest_os \"windows\"", f.name)
			}
		}
		return
	}
	if j.Format == job.FormatIgnition {
		r.Add("guest_os", job.CodeConflict, "a Windows guest does not run Ignition; use format \"configdrive\" (cloudbase-init's ConfigDriveService)")
	}
	if j.Format != job.FormatConfigDrive && j.Format != job.FormatIgnition {
		for _, f := range adminFields {
			if f.set {
				r.Add(f.name, job.CodeConflict, "cloudbase-init reads %s only from a config drive (meta_data.json); use format \"configdrive\" (its NoCloud reader has no administrator settings)", f.name)
			}
		}
	}
	kinds.Refuse(j, kinds.Windows, true, r)
	job.CheckWindowsFields(j, r)
}

// reads reports whether format f is one cloudbase-init reads (config-2
// or NoCloud; "" is the default, nocloud) or ignition, which a Windows
// job is refused; any other format checks its own Windows fields.
func reads(f job.Format) bool {
	return f == "" || f == job.FormatNoCloud || f == job.FormatConfigDrive || f == job.FormatIgnition
}
