package ignition

import (
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

// Check checks a job of format "ignition": its delivery and media, the
// fields Ignition cannot carry (the field table), then its users, the
// paths it writes and the user's own config (Butane translated once).
func (kind) Check(j *job.Job, r *job.Report) {
	switch j.IgnitionDelivery {
	case "", job.DeliveryFwCfg, job.DeliveryConfigDrive, job.DeliveryNoCloud, job.DeliveryBlockdev:
	default:
		r.Add("ignition_delivery", job.CodeInvalid, "%s is not an Ignition delivery; use \"fwcfg\", \"blockdev\", \"configdrive\" or \"nocloud\"", job.Quote(string(j.IgnitionDelivery)))
	}
	if (j.IgnitionDelivery == "" || j.IgnitionDelivery == job.DeliveryFwCfg || j.IgnitionDelivery == job.DeliveryBlockdev) && j.Media == job.MediaVFAT {
		d := j.IgnitionDelivery
		if d == "" {
			d = job.DeliveryFwCfg
		}
		r.Add("media", job.CodeConflict, "ignition_delivery %s passes the config file itself, not an image; media only applies to \"configdrive\" and \"nocloud\"", job.Quote(string(d)))
	}
	kinds.Refuse(j, kinds.Ignition, true, r)
	for i, u := range j.Users {
		userProblems(u, job.Index("users", i), r)
	}
	gen := generatedPaths(j)
	for i, f := range j.Files {
		if by, ok := gen[f.Path]; ok {
			r.Add(job.Index("files", i)+".path", job.CodeConflict, "%s is written from %s in the Ignition config; Ignition refuses a config that writes a path twice", job.Quote(f.Path), by)
		}
	}
	if j.Ignition != nil && j.IgnitionBase64 != "" {
		r.Add("ignition", job.CodeConflict, "use only one of ignition and ignition_base64")
		return
	}
	if j.Butane != "" {
		if other := job.SetNames([]job.SetField{{Name: "ignition", Set: j.Ignition != nil}, {Name: "ignition_base64", Set: j.IgnitionBase64 != ""}}); other != nil {
			r.Add("butane", job.CodeConflict, "use only one of butane and %s: both are the user's own config", other[0])
			return
		}
		raw, problems := job.TranslateButane(j.Butane)
		if len(problems) > 0 {
			r.Errors = append(r.Errors, problems...)
			return
		}
		r.Errors = append(r.Errors, CheckConfig("butane", raw)...)
		return
	}
	raw, field, err := job.IgnitionUserConfig(j)
	if err != nil {
		r.Add(field, job.CodeInvalid, "%v", err)
		return
	}
	if raw != nil {
		r.Errors = append(r.Errors, CheckConfig(field, raw)...)
	}
}

// Defaults gives a job that names no delivery fw_cfg (the agent's engine
// picks the one the domain's architecture reads).
func (kind) Defaults(j *job.Job) {
	if j.IgnitionDelivery == "" {
		j.IgnitionDelivery = job.DeliveryFwCfg
	}
}

// Chooses: the domain's architecture decides the delivery.
func (kind) Chooses() kinds.Choice { return kinds.ChooseDelivery }

// generatedPaths returns the paths the generated config writes for j's
// fields other than files, each with the field that asks for it.
func generatedPaths(j *job.Job) map[string]string {
	m := map[string]string{}
	if j.Hostname != "" {
		m[job.IgnitionHostnamePath] = "hostname"
	}
	if j.Timezone != "" {
		m[job.IgnitionLocaltimePath] = "timezone"
	}
	for i, u := range j.Users {
		if u.Sudo != "" {
			m[job.IgnitionSudoersPath(u.Name)] = job.Index("users", i) + ".sudo"
		}
	}
	for i, k := range j.SSHHostKeys {
		priv, pub := job.IgnitionHostKeyPaths(k.Type)
		m[priv] = job.Index("ssh_host_keys", i)
		m[pub] = job.Index("ssh_host_keys", i)
	}
	return m
}

// userProblems reports what of user u (at p) Ignition cannot carry.
func userProblems(u job.User, p string, r *job.Report) {
	if u.LockPassword != nil && *u.LockPassword {
		r.Errors = append(r.Errors, job.FieldError{Field: p + ".lock_password", Code: job.CodeConflict,
			Message: "format \"ignition\" cannot lock a password: Ignition only sets one; leave the password out instead"})
	}
}
