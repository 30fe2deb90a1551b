package payload

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
	"github.com/vmpayload/vmpayload/payload/kinds/credentials"
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
	// Build: the job's payload is built whatever its action, as
	// `vmpayload build` does: a detach or prebuilt_image job gets its
	// secrets resolved and a Checked too (the agent renders neither).
	Build bool
}

// MsgDomainRequired is the problem of an agent job without a domain.
const MsgDomainRequired = "the agent needs the libvirt domain (name or UUID) the payload is for"

// Checked is a job Check found nothing wrong with, ready to render: its
// defaults applied, its secrets resolved and its host keys parsed. Only
// Check and CheckJob make one, and Render takes nothing else, so no job
// reaches the renderer without the one check.
type Checked struct {
	in cloudinit.Input
	// docs are the documents the check rendered (renderCheckNeeded), which
	// a render with no pinned identity, salt or randomness reuses.
	docs *cloudinit.Documents
	// creds are the values of a job of a valued kind (Kind.Valued:
	// systemd credentials), which renders no documents.
	creds []credentials.Credential
}

// Check decodes and checks a job document and returns the job (nil when
// the document is not a JSON object), the checked job when it passed and
// has a payload to render, and one report of every problem found, each
// naming its field. It is the one check in front of a build: `vmpayload
// validate` and `build`, the API's POST /v1/jobs, the spool intake and the
// engine all call it, so a job one of them accepts is not refused by
// another for its content.
//
// The checked job is nil without opt.Secrets (secrets unresolved, the job
// cannot be rendered) and, unless opt.Build, for a detach or a
// prebuilt_image job (the agent renders nothing for them).
func Check(data []byte, opt CheckOptions) (*job.Job, *Checked, job.Report) {
	j, r := job.ParseWith(data, opt.Defaults)
	c := CheckParsed(j, &r, opt)
	return j, c, r
}

// CheckJob is Check for a decoded job.
func CheckJob(j *job.Job, opt CheckOptions) (*Checked, job.Report) {
	a := j.Apply(opt.Defaults)
	r := a.Validate()
	c := CheckParsed(j, &r, opt)
	return c, r
}

// CheckParsed completes the check of a job job.ParseWith(data,
// opt.Defaults) returned with report r: it adds what running the job needs
// (a domain on the agent, secrets that resolve) for the fields r does not
// already find fault with, and returns the checked job as Check does.
// Check is ParseWith followed by CheckParsed.
func CheckParsed(j *job.Job, r *job.Report, opt CheckOptions) *Checked {
	if j == nil {
		return nil
	}
	var more job.Report
	in, docs, creds, ok := checkRun(j, opt, &more, r.OK())
	seen := map[string]bool{}
	for _, e := range r.Errors {
		seen[e.Field] = true
	}
	for _, e := range more.Errors {
		if !seen[e.Field] {
			r.Errors = append(r.Errors, e)
		}
	}
	if !ok || !r.OK() {
		return nil
	}
	return &Checked{in: in, docs: docs, creds: creds}
}

// checkRun adds what a job needs beyond its own fields: a domain on the
// agent, secrets that resolve and whose content can be used (host keys
// that parse). When the job's own fields are valid (valid), its secrets
// resolve and the render could still refuse it (renderCheckNeeded), the
// documents are rendered once, in memory, so that nothing the renderer
// would refuse (documents over the image limit) is left to the build. It
// returns the render input and whether the job has one: not without
// opt.Secrets, nor for a detach or a prebuilt image unless opt.Build; and
// the documents, when it rendered them.
func checkRun(j *job.Job, opt CheckOptions, r *job.Report, valid bool) (cloudinit.Input, *cloudinit.Documents, []credentials.Credential, bool) {
	if opt.Agent && j.Domain == "" {
		r.Add("domain", job.CodeRequired, MsgDomainRequired)
	}
	a := j.Apply(opt.Defaults)
	if !opt.Build && (a.Action == job.ActionDetach || a.PrebuiltImage != "") {
		return cloudinit.Input{}, nil, nil, false
	}
	if !opt.Secrets {
		return cloudinit.Input{}, nil, nil, false
	}
	if valid && kinds.IsValued(a.Format) {
		// named values (systemd credentials): no documents to render
		creds := checkValues(&a, secrets.Dir(opt.SecretsDir), r)
		return cloudinit.Input{Job: a}, nil, creds, creds != nil
	}
	var sr job.Report
	in, keyTexts := resolveSecrets(&a, secrets.Dir(opt.SecretsDir), &sr)
	r.Merge(sr)
	if !valid || !sr.OK() {
		return in, nil, nil, false
	}
	if !butaneToIgnition(&in.Job, r) {
		return in, nil, nil, false
	}
	var kr job.Report
	in.HostKeys = parseHostKeys(&a, keyTexts, &kr)
	if !kr.OK() {
		r.Merge(kr)
		return in, nil, nil, false
	}
	if renderCheckNeeded(&a, in) {
		var ve *job.ValidationError
		docs, err := cloudinit.Render(in, cloudinit.Options{})
		if errors.As(err, &ve) {
			r.Merge(job.Report{Errors: ve.Errors})
		}
		return in, docs, nil, true
	}
	return in, nil, nil, true
}

// butaneToIgnition replaces j's butane with the Ignition config Butane
// translates it to, as ignition_base64: the job that is rendered, and that
// a recipe records, holds the Ignition config itself, so that a rebuild
// (the libvirt hook, the agent's start-up) gives the same bytes without
// translating again, whatever Butane release the rebuilding binary links
// (a newer one may translate differently, and its gzip of inline contents
// may differ). It reports false, with the problems, when Butane refuses
// the config, which validation has already reported.
func butaneToIgnition(j *job.Job, r *job.Report) bool {
	if j.Butane == "" {
		return true
	}
	raw, problems := job.TranslateButane(j.Butane)
	if len(problems) > 0 {
		r.Merge(job.Report{Errors: problems})
		return false
	}
	j.Butane, j.IgnitionBase64 = "", base64.StdEncoding.EncodeToString(raw)
	return true
}

// parseHostKeys parses the private keys texts read for j's ssh_host_keys,
// reporting a key that is not a usable private key of its type under the
// secret's field, without quoting it.
func parseHostKeys(j *job.Job, texts []string, r *job.Report) []cloudinit.HostKey {
	keys := make([]cloudinit.HostKey, 0, len(j.SSHHostKeys))
	for i, k := range j.SSHHostKeys {
		hk, err := cloudinit.ParseHostKey(k.Type, texts[i], k.PublicKey)
		if err != nil {
			r.Add(fmt.Sprintf("ssh_host_keys[%d].private_key_secret", i), job.CodeInvalid, "secret %q: %v", k.PrivateKeySecret, err)
			continue
		}
		keys = append(keys, hk)
	}
	return keys
}

// renderCheckNeeded reports whether rendering j could refuse it after its
// fields and secrets passed: documents over the image limit, which only
// content near the limit can reach. Other jobs skip the render (password
// hashing makes it tens of times the cost of the rest of the check).
func renderCheckNeeded(j *job.Job, in cloudinit.Input) bool {
	if in.Sysprep != "" {
		// an answer file (format "sysprep"): filled placeholders can grow an answer file past what a floppy
		// holds (FloppyCapacity, under a tenth of the content limit): an
		// escaped value is at most 6 bytes a character, and no value is
		// longer than the passwords or MaxSysprepValueBytes
		n := len(in.Sysprep) + (strings.Count(in.Sysprep, "{{")+strings.Count(in.Sysprep, "$")/2)*6*max(len(in.AdminPassword), len(in.DomainAdminPassword), job.MaxSysprepValueBytes)
		return n > image.FloppyCapacity
	}
	n := len(in.UserData) + len(j.NetworkConfig) + len(j.VendorData)
	for _, f := range j.Files {
		n += len(f.Content)
	}
	return n > job.MaxContentBytes/2
}

// resolveSecrets reads the secrets j names from sd and returns the render
// input carrying them and the text of each host key secret (parsed once
// every secret resolved); problems are added to r by field.
func resolveSecrets(j *job.Job, sd secrets.Dir, r *job.Report) (cloudinit.Input, []string) {
	in := cloudinit.Input{Job: *j, Passwords: make([]string, len(j.Users))}
	keyTexts := make([]string, len(j.SSHHostKeys))
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
		keyTexts[i] = string(b)
		if strings.TrimSpace(keyTexts[i]) == "" {
			r.Add(f, job.CodeInvalid, "secret %q is empty", k.PrivateKeySecret)
		}
	}
	if j.AdminPasswordSecret != "" {
		// one reading for every format that takes it: cloudbase-init's
		// meta_data.json admin_pass (configdrive) and the answer file's
		// {{admin_password}} (sysprep)
		in.AdminPassword = readPasswordSecret(sd, "admin_password_secret", j.AdminPasswordSecret, "the administrator password", r)
	}
	if kinds.Owns(j, "sysprep") {
		resolveSysprep(j, sd, &in, r)
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
		} else if in.UserData = string(b); j.IsWindows() {
			r.Merge(job.ValidateWindowsSecretUserData(j, "user_data_secret", j.UserDataSecret, in.UserData))
		} else {
			r.Merge(job.ValidateSecretUserData("user_data_secret", j.UserDataSecret, in.UserData))
			// the merge check Validate makes for inline user-data (its
			// message quotes no content)
			job.CheckMergeableLists(j, in.UserData, r)
			job.CheckReporterUserData(j, in.UserData, r)
		}
	}
	return in, keyTexts
}

// resolveSysprep puts the answer file of j (format "sysprep") into in,
// reading sysprep_secret from sd; a secret's answer file is checked here,
// where its text is known (never quoted). The administrator password is
// read with the other secrets (resolveSecrets), for every format.
func resolveSysprep(j *job.Job, sd secrets.Dir, in *cloudinit.Input, r *job.Report) {
	k := kinds.Of(j.Format)
	if text := k.Document(j); text != "" {
		in.Sysprep = text // Validate checked it
	}
	if j.SysprepSecret != "" && job.ValidSecretName(j.SysprepSecret) {
		b, err := sd.Read(j.SysprepSecret)
		if err != nil {
			addSecretError(r, "sysprep_secret", j.SysprepSecret, err)
		} else {
			in.Sysprep = string(b)
			r.Errors = append(r.Errors, k.CheckDocument(j, "sysprep_secret", in.Sysprep)...)
		}
	}
	if j.DomainAdminPasswordSecret != "" {
		in.DomainAdminPassword = readPasswordSecret(sd, "domain_admin_password_secret", j.DomainAdminPasswordSecret, "the domain account's password", r)
	}
	if j.ProductKeySecret != "" {
		if k := readPasswordSecret(sd, "product_key_secret", j.ProductKeySecret, "the product key", r); k != "" {
			if job.ProductKeyRE().MatchString(k) {
				in.ProductKey = k
			} else {
				r.Add("product_key_secret", job.CodeInvalid, "secret %q is not a Windows product key: five groups of five letters and digits separated by hyphens", j.ProductKeySecret)
			}
		}
	}
}

// readPasswordSecret reads the one-line secret name given in field f (a
// password or key: what describes it) and returns it without its line
// end; "" with a problem added to r, which never quotes its content.
func readPasswordSecret(sd secrets.Dir, f, name, what string, r *job.Report) string {
	if !job.ValidSecretName(name) {
		return "" // Validate reports it
	}
	b, err := sd.Read(name)
	if err != nil {
		addSecretError(r, f, name, err)
		return ""
	}
	pw := strings.TrimRight(string(b), "\r\n")
	switch {
	case pw == "":
		r.Add(f, job.CodeInvalid, "secret %q is empty", name)
	case strings.ContainsAny(pw, "\x00\r\n"):
		r.Add(f, job.CodeInvalid, "secret %q holds more than one line or a NUL byte; %s is its first line", name, what)
	case len(pw) > job.MaxAdminPasswordBytes:
		r.Add(f, job.CodeTooLarge, "secret %q is longer than %d bytes; Windows passwords are at most 127 characters", name, job.MaxAdminPasswordBytes)
	case !xmlText(pw):
		r.Add(f, job.CodeInvalid, "secret %q holds invalid UTF-8 or control characters, which %s (and an answer file) cannot carry", name, what)
	default:
		return pw
	}
	return ""
}

// xmlText reports whether s is valid UTF-8 without control characters
// (which XML 1.0 cannot carry, besides tab and line ends, which a
// password does not have).
func xmlText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c == 0xfffe || c == 0xffff {
			return false
		}
	}
	return true
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
