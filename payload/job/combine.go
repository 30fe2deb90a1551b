package job

// validateCombinations reports fields that are each valid but cannot be
// expressed together in the job's format or user-data mode. They used to
// be found only when the payload was rendered, so `vmpayload validate` and
// the API accepted jobs that build and the agent then refused. A job that
// names no format gets the agent's default_format, so the checks that
// depend on the format apply once it is known: validate j.Apply(defaults)
// (ParseWith does) to have them all.
func validateCombinations(j *Job, r *Report) {
	if KindTraits(j).OpenStack && j.NetworkConfig != "" {
		r.Add("network_config", CodeConflict, "format \"configdrive\" carries network settings in network_data.json; describe them with nics and dns, or give the network_data.json object as network_data, instead of network_config")
	}
	// network_data with format nocloud: validateNetworkData.
	if j.UserDataMode == ModeReplace {
		lost := SetNames([]SetField{
			{"timezone", j.Timezone != ""}, {"users", len(j.Users) > 0}, {"files", len(j.Files) > 0},
			{"runcmd", len(j.Runcmd) > 0}, {"ssh_password_auth", j.SSHPasswordAuth != nil},
			{"regenerate_ssh_host_keys", j.RegenerateSSHHostKeys != nil},
			{"locale", j.Locale != ""}, {"ssh_host_keys", len(j.SSHHostKeys) > 0},
			{"power_state", j.PowerState != nil}, {"phone_home", j.PhoneHome != nil},
			{"random_seed", j.RandomSeed != nil && KindTraits(j).NoCloud},
		})
		if len(lost) > 0 {
			r.Add("user_data_mode", CodeConflict, "mode \"replace\" writes the user's user-data verbatim, so %v would be dropped; use mode \"merge\" or move them into user_data", lost)
		}
	}
}

// Defaults are what a job that leaves a field out gets beyond the fixed
// defaults (action, format, media, user_data_mode): the agent's default_format and guest_report.
type Defaults struct {
	// Format is the format of a job that names none ("" is nocloud).
	Format Format
	// GuestReport is the agent's guest_report, for a job that leaves it
	// out; nil (the offline commands) leaves guest_report as written.
	GuestReport *bool
}

// Apply returns a copy of j with every default filled in: d's, then the
// fixed ones. It is the one place a job's defaults are
// applied; the agent, the engine and the offline commands all use it. It
// is idempotent: applying d to an applied job changes nothing.
//
// With d.GuestReport, guest_report is settled the way the agent runs the
// job: a job that leaves it out gets d's; a prebuilt_image job gets the
// report channel only when it asks for it (the image is the submitter's:
// it may carry the reporter, a vmpayload build with guest_report true); a
// detach never does. The result is true, an explicit false, or absent, so
// a job without the report renders as before.
func (j Job) Apply(d Defaults) Job {
	if j.Format == "" {
		j.Format = d.Format
	}
	j = j.withDefaults()
	if d.GuestReport != nil {
		switch {
		case j.Action == ActionDetach:
			j.GuestReport = nil
		case j.GuestReport == nil && *d.GuestReport && j.PrebuiltImage == "" && hooks().Takes(&j, "guest_report"):
			// the reporter is a cloud-init part: an Ignition or sysprep job
			// or a Windows guest (cloudbase-init) has none
			on := true
			j.GuestReport = &on
		}
	}
	return j
}

// ParseWith is Parse for a job that will run with defaults d: the job is
// validated with them applied, so checks that depend on a defaulted field
// (the format) are made too. The returned job is as written, without
// defaults.
func ParseWith(data []byte, d Defaults) (*Job, Report) {
	return parse(data, func(j *Job) Report {
		a := j.Apply(d)
		return a.Validate()
	})
}
