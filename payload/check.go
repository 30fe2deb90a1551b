package payload

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/vmpayload/vmpayload/payload/cloudinit"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/secrets"
)

// CheckOptions say how a job will be run, which decides what Check asks of
// it.
type CheckOptions struct {
	// Defaults are applied before the job is validated (the agent's
	// default_format); fields that depend on them are checked with them.
	Defaults job.Defaults
	// Secrets makes Check resolve every secret the job names in
	// SecretsDir and report each that cannot be used, by field and
	// name (never its content). Without it secret names are checked for
	// their shape only (vmpayload validate without --secrets-dir).
	Secrets    bool
	SecretsDir string
	// Agent: the job runs on the agent, which needs the domain.
	Agent bool
}

// MsgDomainRequired is the problem of an agent job without a domain.
const MsgDomainRequired = "the agent needs the libvirt domain (name or UUID) the payload is for"

// Check decodes and checks a job document and returns the job (nil when
// the document is not a JSON object) and one report of every problem
// found, each naming its field. It is the one check in front of a build:
// `vmpayload validate` and `build`, the API's POST /v1/jobs, the spool
// intake and the engine all call it, so a job one of them accepts is not
// refused by another for its content.
func Check(data []byte, opt CheckOptions) (*job.Job, job.Report) {
	j, r := job.ParseWith(data, opt.Defaults)
	CheckParsed(j, &r, opt)
	return j, r
}

// CheckParsed completes the check of a job job.ParseWith(data,
// opt.Defaults) returned with report r: it adds what running the job needs
// (a domain on the agent, secrets that resolve) for the fields r does not
// already find fault with. Check is ParseWith followed by CheckParsed.
func CheckParsed(j *job.Job, r *job.Report, opt CheckOptions) {
	if j == nil {
		return
	}
	var more job.Report
	checkRun(j, opt, &more, r.OK())
	seen := map[string]bool{}
	for _, e := range r.Errors {
		seen[e.Field] = true
	}
	for _, e := range more.Errors {
		if !seen[e.Field] {
			r.Errors = append(r.Errors, e)
		}
	}
}

// CheckJob is Check for a decoded job.
func CheckJob(j *job.Job, opt CheckOptions) job.Report {
	a := j.Apply(opt.Defaults)
	r := a.Validate()
	CheckParsed(j, &r, opt)
	return r
}

// checkRun adds what a job needs beyond its own fields: a domain on the
// agent, secrets that resolve and whose content can be used. When the
// job's own fields are valid (valid), its secrets resolve and the render
// could still refuse it (renderCheckNeeded), the documents are rendered
// once, in memory, so that nothing the renderer would refuse (a host key
// that is not a private key of its type, documents over the image limit)
// is left to the build.
func checkRun(j *job.Job, opt CheckOptions, r *job.Report, valid bool) {
	if opt.Agent && j.Domain == "" {
		r.Add("domain", job.CodeRequired, MsgDomainRequired)
	}
	a := j.Apply(opt.Defaults)
	if !opt.Secrets || a.Action == job.ActionDetach || a.PrebuiltImage != "" {
		return
	}
	var sr job.Report
	in := resolveSecrets(&a, secrets.Dir(opt.SecretsDir), &sr)
	r.Merge(sr)
	if !valid || !sr.OK() || !renderCheckNeeded(&a, in) {
		return
	}
	var ve *job.ValidationError
	if _, err := cloudinit.Render(in, cloudinit.Options{}); errors.As(err, &ve) {
		r.Merge(job.Report{Errors: ve.Errors})
	}
}

// renderCheckNeeded reports whether rendering j could refuse it after
// its fields and secrets passed: a host key secret whose content is not a
// usable private key, or documents over the image limit, which only
// content near the limit can reach. Other jobs skip the render (password
// hashing makes it tens of times the cost of the rest of the check).
func renderCheckNeeded(j *job.Job, in cloudinit.Input) bool {
	if len(j.SSHHostKeys) > 0 {
		return true
	}
	n := len(in.UserData) + len(j.NetworkConfig) + len(j.VendorData)
	for _, f := range j.Files {
		n += len(f.Content)
	}
	return n > job.MaxContentBytes/2
}

// resolveSecrets reads the secrets j names from sd and returns the render
// input carrying them; problems are added to r by field.
func resolveSecrets(j *job.Job, sd secrets.Dir, r *job.Report) cloudinit.Input {
	in := cloudinit.Input{Job: *j, Passwords: make([]string, len(j.Users)), HostKeys: make([]string, len(j.SSHHostKeys))}
	for i, u := range j.Users {
		if u.PasswordSecret == "" {
			continue
		}
		b, err := sd.Read(u.PasswordSecret)
		if err != nil {
			addSecretError(r, fmt.Sprintf("users[%d].password_secret", i), u.PasswordSecret, err)
			continue
		}
		in.Passwords[i] = strings.TrimRight(string(b), "\r\n")
		if in.Passwords[i] == "" {
			r.Add(fmt.Sprintf("users[%d].password_secret", i), job.CodeInvalid, "secret %q is empty", u.PasswordSecret)
		}
	}
	for i, k := range j.SSHHostKeys {
		if k.PrivateKeySecret == "" || !job.ValidSecretName(k.PrivateKeySecret) {
			continue // Validate reports it
		}
		f := fmt.Sprintf("ssh_host_keys[%d].private_key_secret", i)
		b, err := sd.Read(k.PrivateKeySecret)
		if err != nil {
			addSecretError(r, f, k.PrivateKeySecret, err)
			continue
		}
		in.HostKeys[i] = string(b)
		if strings.TrimSpace(in.HostKeys[i]) == "" {
			r.Add(f, job.CodeInvalid, "secret %q is empty", k.PrivateKeySecret)
		}
	}
	switch {
	case j.UserData != "":
		in.UserData = j.UserData
	case j.UserDataBase64 != "":
		b, err := base64.StdEncoding.DecodeString(j.UserDataBase64)
		if err == nil {
			in.UserData = string(b)
		} // else: Validate reports it
	case j.UserDataSecret != "":
		b, err := sd.Read(j.UserDataSecret)
		if err != nil {
			addSecretError(r, "user_data_secret", j.UserDataSecret, err)
		} else {
			in.UserData = string(b)
			r.Merge(job.ValidateSecretUserData("user_data_secret", j.UserDataSecret, in.UserData))
			// the merge check Validate makes for inline user-data (its
			// message quotes no content)
			job.CheckMergeableLists(j, in.UserData, r)
		}
	}
	return in
}

func addSecretError(r *job.Report, field, name string, err error) {
	switch {
	case errors.Is(err, secrets.ErrNotFound):
		r.Add(field, job.CodeNotFound, "secret %q does not exist in the secrets directory", name)
	case errors.Is(err, secrets.ErrNoDir):
		r.Add(field, job.CodeNotFound, "secret %q cannot be resolved: no secrets directory is configured", name)
	case errors.Is(err, secrets.ErrInvalidName):
		r.Add(field, job.CodeInvalid, "%q is not a secret name", name)
	case errors.Is(err, secrets.ErrNotRegular):
		r.Add(field, job.CodeInvalid, "secret %q is not a regular file (symlinks are refused)", name)
	case errors.Is(err, secrets.ErrDirUnreadable):
		r.Add(field, job.CodeNotFound, "secret %q cannot be read: %v", name, err)
	case errors.Is(err, secrets.ErrTooLarge):
		r.Add(field, job.CodeTooLarge, "secret %q is larger than %d bytes", name, secrets.MaxSecretBytes)
	default:
		r.Add(field, job.CodeNotFound, "secret %q cannot be read: %v", name, errors.Unwrap(err))
	}
}
