package sysprep

import (
	"strings"

	answer "github.com/vmpayload/vmpayload/payload/internal/sysprep"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
	"github.com/vmpayload/vmpayload/payload/kinds/cloudbase"
)

// Check checks a job of format "sysprep": its guest_os, the fields the
// answer file cannot carry (the field table), its medium and file name,
// the fields that fill the answer file and the file itself.
func (kind) Check(j *job.Job, r *job.Report) {
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
	if long, digits := cloudbase.ComputerName(j.Hostname); j.Hostname != "" && job.ValidHostname(j.Hostname) && (strings.Contains(j.Hostname, ".") || long || digits) {
		// a valid host name of one label within the computer-name rule
		r.Add("hostname", job.CodeInvalid, "%s is not a Windows computer name: one label of at most %d letters, digits and hyphens (the NetBIOS limit), not only digits", job.Quote(j.Hostname), cloudbase.NetBIOSNameMax)
	}
	if j.AdminPasswordSecret != "" {
		job.CheckSecretName("admin_password_secret", j.AdminPasswordSecret, r)
	}
	checkValues(j, r)
	if j.WindowsTimezone != "" {
		if j.Timezone != "" {
			r.Add("windows_timezone", job.CodeConflict, "use only one of timezone (an IANA name, mapped to Windows') and windows_timezone")
		} else if !answer.IsWindowsZone(j.WindowsTimezone) {
			r.Add("windows_timezone", job.CodeNotFound, "%s is not a Windows time zone name such as \"W. Europe Standard Time\" or \"UTC\" (the names of the Unicode CLDR's windowsZones table)", job.Quote(j.WindowsTimezone))
		}
	} else if j.Timezone != "" {
		if _, ok := answer.WindowsZone(j.Timezone); !ok {
			r.Add("timezone", job.CodeNotFound, "time zone %s has no Windows time zone in the Unicode CLDR's mapping; give the Windows name as windows_timezone instead", job.Quote(j.Timezone))
		}
	}
	set := job.SetNames([]job.SetField{{Name: "sysprep", Set: j.Sysprep != ""}, {Name: "sysprep_base64", Set: j.SysprepBase64 != ""}, {Name: "sysprep_secret", Set: j.SysprepSecret != ""}})
	switch len(set) {
	case 0:
		r.Add("sysprep", job.CodeRequired, "format \"sysprep\" needs the answer file: give sysprep (its XML text), sysprep_base64 or sysprep_secret")
		return
	case 1:
	default:
		r.Add(set[0], job.CodeConflict, "use only one of sysprep, sysprep_base64 and sysprep_secret (got %s)", strings.Join(set, ", "))
		return
	}
	if j.SysprepSecret != "" {
		job.CheckSecretName("sysprep_secret", j.SysprepSecret, r)
		return // its content is checked when the secret is read (CheckAnswer)
	}
	text, field, err := Answer(j)
	if err != nil {
		r.Add(field, job.CodeInvalid, "%v", err)
		return
	}
	r.Errors = append(r.Errors, CheckAnswer(j, field, text, false)...)
}

// Document is the answer file j gives inline (sysprep, sysprep_base64);
// "" for one given by sysprep_secret.
func (kind) Document(j *job.Job) string {
	text, _, err := Answer(j)
	if err != nil {
		return "" // Check reports it
	}
	return text
}

// CheckDocument checks the answer file read from the secret named in
// field (sysprep_secret), quoting none of it.
func (kind) CheckDocument(j *job.Job, field, text string) []job.FieldError {
	return CheckAnswer(j, field, text, true)
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
