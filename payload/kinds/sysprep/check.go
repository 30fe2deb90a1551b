package sysprep

import (
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

func init() { kinds.RegisterCheck(kinds.Sysprep, kind{}) }

// Check checks a job of format "sysprep": its guest_os, the fields the
// answer file cannot carry (the field table), its medium and file name,
// then the fields that fill the answer file and the file itself
// (job.CheckSysprepFields). Of any other job it refuses the fields only
// sysprep takes.
func (kind) Check(j *job.Job, r *job.Report) {
	if j.Format != job.FormatSysprep {
		kinds.Refuse(j, kinds.Sysprep, false, r)
		return
	}
	// guest_os: the cloudbase-init kind checked the value and leaves the
	// rest of a sysprep job to this one; "" and "windows" both mean
	// Windows here, "linux" contradicts the format
	if j.GuestOS == job.GuestLinux {
		r.Add("guest_os", job.CodeConflict, "format \"sysprep\" is a Windows answer file: guest_os must be \"windows\" or left out, not %s", job.Quote(string(j.GuestOS)))
	}
	kinds.Refuse(j, kinds.Sysprep, true, r)
	switch j.SysprepMedium {
	case "", job.MediumFloppy, job.MediumCDROM:
		if j.SysprepMedium != "" && j.Media != "" && j.Media != j.SysprepMedium.Media() {
			r.Add("media", job.CodeConflict, "sysprep_medium %s takes media %s, not %s (or leave media out)", job.Quote(string(j.SysprepMedium)), job.Quote(string(j.SysprepMedium.Media())), job.Quote(string(j.Media)))
		}
	default:
		r.Add("sysprep_medium", job.CodeInvalid, "%s is not a sysprep medium; use \"floppy\" or \"cdrom\"", job.Quote(string(j.SysprepMedium)))
	}
	switch j.SysprepFileName {
	case "", job.UnattendXML, job.AutounattendXML:
	default:
		r.Add("sysprep_file_name", job.CodeInvalid, "%s is not an answer file name Windows looks for; use %q (sysprep's specialize and oobeSystem passes) or %q (Windows Setup)", job.Quote(j.SysprepFileName), job.UnattendXML, job.AutounattendXML)
	}
	job.CheckSysprepFields(j, r)
}

// Defaults picks the medium (sysprep_medium, else the one media names,
// else a floppy: the agent's engine then picks by the domain's machine),
// the file name Unattend.xml and the medium's media.
func (kind) Defaults(j *job.Job) {
	switch {
	case j.SysprepMedium != "":
	case j.Media == job.MediaISO:
		// media names the medium when sysprep_medium does not
		j.SysprepMedium = job.MediumCDROM
	default:
		// the agent picks the medium by the domain's machine
		// (agent/engine sysprepMedium); without a domain, a floppy
		j.SysprepMedium = job.MediumFloppy
	}
	if j.SysprepFileName == "" {
		j.SysprepFileName = job.UnattendXML
	}
	if j.Media == "" {
		j.Media = j.SysprepMedium.Media()
	}
}

// Chooses: the domain's machine decides the medium.
func (kind) Chooses() kinds.Choice { return kinds.ChooseMedium }
