// Package cloudbase is the payload kind of a Windows guest (guest_os
// "windows") that cloudbase-init provisions from a cloud-init image: a
// config drive (format "configdrive", its ConfigDriveService) or a NoCloud
// seed. It shares the images of package cloudinit and has checks of its
// own: the fields cloudbase-init cannot honour, the administrator's fields
// only it reads.
package cloudbase

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"unicode"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

func init() { kinds.RegisterCheck(kinds.Windows, check{}) }

type check struct{}

// Check checks guest_os and the fields only a Windows guest may give,
// and, for a Windows guest, refuses every field cloudbase-init cannot
// honour, then checks the fields it reads.
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
	adminFields := job.SetNames([]job.SetField{
		{Name: "admin_username", Set: j.AdminUsername != ""}, {Name: "admin_password_secret", Set: j.AdminPasswordSecret != ""}, {Name: "admin_certs", Set: len(j.AdminCerts) > 0},
	})
	if j.GuestOS != job.GuestWindows {
		for _, f := range adminFields {
			r.Add(f, job.CodeConflict, "%s is read by cloudbase-init: it needs guest_os \"windows\"", f)
		}
		return
	}
	if j.Format == job.FormatIgnition {
		r.Add("guest_os", job.CodeConflict, "a Windows guest does not run Ignition; use format \"configdrive\" (cloudbase-init's ConfigDriveService)")
	}
	if j.Format != job.FormatConfigDrive && j.Format != job.FormatIgnition {
		for _, f := range adminFields {
			r.Add(f, job.CodeConflict, "cloudbase-init reads %s only from a config drive (meta_data.json); use format \"configdrive\" (its NoCloud reader has no administrator settings)", f)
		}
	}
	kinds.Refuse(j, kinds.Windows, true, r)
	checkFields(j, r)
}

// reads reports whether format f is one cloudbase-init reads (config-2
// or NoCloud; "" is the default, nocloud) or ignition, which a Windows
// job is refused; any other format checks its own Windows fields.
func reads(f job.Format) bool {
	return f == "" || f == job.FormatNoCloud || f == job.FormatConfigDrive || f == job.FormatIgnition
}

// checkFields checks the fields cloudbase-init reads of a job for a
// Windows guest: its computer name (ComputerName, the one rule), the
// administrator's name, password secret and certificates, and meta_data
// beside them.
func checkFields(j *job.Job, r *job.Report) {
	if j.Hostname != "" && job.ValidHostname(j.Hostname) {
		short, _, _ := strings.Cut(strings.TrimSuffix(j.Hostname, "."), ".")
		switch long, digits := ComputerName(short); {
		case long:
			r.Add("hostname", job.CodeInvalid, "%s is not a Windows computer name: its first label %s has %d characters, the NetBIOS limit is %d (cloudbase-init would cut it to %s)", job.Quote(j.Hostname), job.Quote(short), len(short), NetBIOSNameMax, job.Quote(short[:NetBIOSNameMax]))
		case digits:
			r.Add("hostname", job.CodeInvalid, "%s is not a Windows computer name: its first label %s is all digits", job.Quote(j.Hostname), job.Quote(short))
		}
	}
	if j.AdminUsername != "" {
		CheckUser("admin_username", j.AdminUsername, r)
	}
	if j.AdminPasswordSecret != "" {
		job.CheckSecretName("admin_password_secret", j.AdminPasswordSecret, r)
	}
	for i, c := range j.AdminCerts {
		if err := CheckPEMCertificate(c); err != nil {
			r.Add(job.Index("admin_certs", i), job.CodeInvalid, "%s is not a PEM X.509 certificate (\"-----BEGIN CERTIFICATE-----...\"): %v", job.Quote(c), err)
		}
	}
	checkMeta(j, r)
}

// checkMeta refuses meta_data that gives what a Windows field
// writes: one of them would silently win.
func checkMeta(j *job.Job, r *job.Report) {
	if j.MetaData == nil {
		return
	}
	// a password inline in meta_data would be kept in the recipe, in the
	// domain XML that read-only clients read: only by secret (the value is
	// never quoted)
	const viaSecret = "give the administrator password as admin_password_secret: meta_data is kept as it is in the domain's recipe, which read-only libvirt clients can read"
	if _, ok := j.MetaData["admin_pass"]; ok {
		r.Add("meta_data.admin_pass", job.CodeInvalid, "%s", viaSecret)
	}
	if m, ok := j.MetaData["meta"].(map[string]any); ok {
		if _, ok := m["admin_pass"]; ok {
			r.Add("meta_data.meta.admin_pass", job.CodeInvalid, "%s", viaSecret)
		}
	}
	if j.Format != job.FormatConfigDrive {
		return
	}
	if _, ok := j.MetaData["keys"]; ok && (len(j.SSHAuthorizedKeys) > 0 || len(j.AdminCerts) > 1) {
		r.Add("meta_data.keys", job.CodeConflict, "meta_data gives keys, which the job writes from ssh_authorized_keys and admin_certs; give them there")
	}
	mv, ok := j.MetaData["meta"]
	if !ok {
		return
	}
	meta, isMap := mv.(map[string]any)
	gen := j.AdminUsername != "" || j.AdminPasswordSecret != "" || len(j.AdminCerts) > 0
	if !isMap {
		if gen {
			r.Add("meta_data.meta", job.CodeConflict, "meta_data.meta must be an object when the job gives admin_username, admin_password_secret or admin_certs (they are written into it), got %s", job.Quote(fmt.Sprint(mv)))
		}
		return
	}
	// meta.admin_username is the one key under "meta" a Windows field writes
	if _, ok := meta["admin_username"]; ok && j.AdminUsername != "" {
		r.Add("meta_data.meta.admin_username", job.CodeConflict, "meta_data.meta gives %s, which the job writes from %s; give it once", "admin_username", "admin_username")
	}
	if len(j.AdminCerts) > 0 {
		for k := range meta {
			if strings.HasPrefix(k, "admin_cert") {
				r.Add("meta_data.meta."+k, job.CodeConflict, "meta_data.meta gives %s, and the job writes meta.admin_cert0... from admin_certs; give the certificates there", k)
				break
			}
		}
	}
}

// NetBIOSNameMax is the longest computer name Windows keeps:
// cloudbase-init cuts a longer first label to 15 characters (its
// netbios_host_name_compatibility, on by default), which the job refuses
// rather than let happen silently.
const NetBIOSNameMax = 15

// ComputerName is the one Windows computer-name rule, for name, a
// hostname's (first) label: whether it is longer than NetBIOSNameMax or
// all digits, either of which Windows does not take.
func ComputerName(name string) (long, digits bool) {
	return len(name) > NetBIOSNameMax, strings.Trim(name, "0123456789") == ""
}

// windowsUserBad holds the characters Windows refuses in an account name.
const windowsUserBad = "\"/\\[]:;|=,+*?<>@"

// CheckUser reports a name at p that cannot be a Windows account
// name.
func CheckUser(p, name string, r *job.Report) {
	switch {
	case len([]rune(name)) > 20:
		r.Add(p, job.CodeInvalid, "%s is not a Windows account name: at most 20 characters", job.Quote(name))
	case strings.ContainsAny(name, windowsUserBad) || strings.ContainsFunc(name, unicode.IsControl):
		r.Add(p, job.CodeInvalid, "%s is not a Windows account name: none of %s or control characters", job.Quote(name), windowsUserBad)
	case strings.Trim(name, ". ") == "" || strings.TrimSpace(name) != name:
		r.Add(p, job.CodeInvalid, "%s is not a Windows account name: not only dots and spaces, no leading or trailing spaces", job.Quote(name))
	}
}

// CheckPEMCertificate checks that s is exactly one PEM CERTIFICATE block
// holding an X.509 certificate, with nothing but white space around it.
func CheckPEMCertificate(s string) error {
	b, rest := pem.Decode([]byte(s))
	switch {
	case b == nil:
		return fmt.Errorf("no PEM block")
	case b.Type != "CERTIFICATE":
		return fmt.Errorf("the PEM block is a %q, not a CERTIFICATE", b.Type)
	case strings.TrimSpace(string(rest)) != "":
		return fmt.Errorf("more than one PEM block, or text after it; give one certificate per element")
	case strings.TrimSpace(s[:strings.Index(s, "-----BEGIN")]) != "":
		return fmt.Errorf("text before the PEM block")
	}
	if _, err := x509.ParseCertificate(b.Bytes); err != nil {
		return fmt.Errorf("parsing it: %w", err)
	}
	return nil
}
