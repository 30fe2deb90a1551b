package job

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// This file holds what a job for a Windows guest (guest_os "windows")
// means: cloudbase-init reads its payload, an OpenStack config drive
// (format "configdrive") or, in recent releases, a NoCloud seed. Its
// rules here follow cloudbase-init's own readers (metadata/services/
// baseopenstackservice.py, plugins/common/userdata.py and
// userdatautils.py, utils/hostname.py); test/cloudbaseinit judges the
// images with that code. docs/windows.md describes them.

// MaxAdminCertChunk is the length of the meta.admin_certN pieces a
// certificate is cut into: Nova's limit on a metadata value, which
// cloudbase-init undoes by joining admin_cert0, admin_cert1, ... in order.
const MaxAdminCertChunk = 255

// WindowsUserDataKind is what cloudbase-init makes of a user-data text
// (after undoing gzip).
type WindowsUserDataKind string

// Kinds of user-data cloudbase-init tells apart. The script kinds are the
// executors of its userdatautils.get_command, tried in its order.
const (
	WinKindMultipart   WindowsUserDataKind = "multipart"     // "Content-Type: multipart" in the header block
	WinKindTemplate    WindowsUserDataKind = "jinja"         // "## template: jinja": rendered, then read again
	WinKindCloudConfig WindowsUserDataKind = "cloud-config"  // "#cloud-config" (its subset of modules)
	WinKindCertificate WindowsUserDataKind = "x509"          // a PEM certificate, for WinRM certificate log-on
	WinKindCmd         WindowsUserDataKind = "cmd"           // "rem cmd": a batch file (execcmd.Shell)
	WinKindPython      WindowsUserDataKind = "python"        // "#!/usr/bin/env python" (execcmd.Python)
	WinKindShell       WindowsUserDataKind = "sh"            // "#!" (execcmd.Bash)
	WinKindPS1         WindowsUserDataKind = "ps1_sysnative" // "#ps1" or "#ps1_sysnative": 64-bit PowerShell
	WinKindPS1x86      WindowsUserDataKind = "ps1_x86"       // "#ps1_x86": 32-bit PowerShell
	WinKindEC2         WindowsUserDataKind = "ec2"           // <script>...</script> / <powershell>...</powershell>
	WinKindUnknown     WindowsUserDataKind = ""
)

// IsScript reports whether cloudbase-init runs user-data of kind k as a
// script (or certificate), which nothing can be merged into.
func (k WindowsUserDataKind) IsScript() bool {
	switch k {
	case WinKindCmd, WinKindPython, WinKindShell, WinKindPS1, WinKindPS1x86, WinKindEC2, WinKindCertificate:
		return true
	}
	return false
}

// winKindNames describes the script kinds in messages.
var winKindNames = map[WindowsUserDataKind]string{
	WinKindCmd: "a \"rem cmd\" batch script", WinKindPython: "a Python script", WinKindShell: "a \"#!\" script",
	WinKindPS1: "a #ps1_sysnative PowerShell script", WinKindPS1x86: "a #ps1_x86 PowerShell script",
	WinKindEC2: "an EC2-style <powershell>/<script> script", WinKindCertificate: "a PEM certificate",
}

// The script tests of cloudbase-init's userdatautils, in its order: the
// first that matches decides. All but the EC2 tags are anchored at the
// very start of the data and case-sensitive.
var winScripts = []struct {
	re   func() *regexp.Regexp
	kind WindowsUserDataKind
}{
	{LazyRegexp(`^rem\s+cmd\s`), WinKindCmd},
	{LazyRegexp(`^#!\s*/usr/bin/env\s+python\s`), WinKindPython},
	{LazyRegexp(`^#!`), WinKindShell},
	{LazyRegexp(`^#(ps1|ps1_sysnative)\s`), WinKindPS1},
	{LazyRegexp(`^#ps1_x86\s`), WinKindPS1x86},
	{LazyRegexp(`</?(script|powershell)>`), WinKindEC2},
}

var winTemplateRE = LazyRegexp(`(?i)^##\s*template:\s*jinja\s*(\n|$)`)

// ClassifyWindowsUserData returns the kind cloudbase-init gives the
// (decompressed) user-data s: MIME when its header block (up to the first
// empty line) holds "Content-Type: multipart"; a template, cloud-config
// or certificate by its start; else the first script test that matches.
func ClassifyWindowsUserData(s string) WindowsUserDataKind {
	header, _, _ := strings.Cut(s, "\n\n")
	switch {
	case strings.Contains(header, "Content-Type: multipart"):
		return WinKindMultipart
	case winTemplateRE().MatchString(s):
		return WinKindTemplate
	case strings.HasPrefix(s, "#cloud-config"):
		return WinKindCloudConfig
	case strings.HasPrefix(strings.TrimSpace(s), "-----BEGIN CERTIFICATE-----"):
		return WinKindCertificate
	}
	for _, sc := range winScripts {
		if sc.re().MatchString(s) {
			return sc.kind
		}
	}
	return WinKindUnknown
}

// validateWindowsUserData checks user-data s (given in field p) for a
// Windows guest the way cloudbase-init reads it: gzip undone, a kind it
// knows, cloud-config that is a YAML mapping; a script cannot be merged.
// show quotes the content in messages (or, for a secret, describes it).
func validateWindowsUserData(j *Job, p, s string, show func(string) string, detail func(error) string, r *Report) {
	if !KindTraits(j).Cloudbase {
		return // cloudbase-init does not read it; the format refuses it
	}
	if IsGzip([]byte(s)) {
		t, err := UserDataText(s)
		if err != nil {
			r.Add(p, CodeInvalid, "gzip-compressed content (%d bytes) cannot be used: %v", len(s), err)
			return
		}
		s = t
	}
	k := ClassifyWindowsUserData(s)
	switch k {
	case WinKindUnknown:
		r.Add(p, CodeInvalid, "cloudbase-init would ignore %s (\"Unsupported user_data format\"): it does not start with \"#ps1_sysnative\", \"#ps1_x86\", \"#ps1\", \"rem cmd\", \"#!\", \"#cloud-config\" or \"## template: jinja\", holds no <powershell> or <script> section and has no \"Content-Type: multipart\" header", show(s))
		return
	case WinKindCloudConfig:
		if d, _, err := LoadYAMLMapping(s); errors.Is(err, ErrYAMLLimit) {
			r.Add(p, CodeTooLarge, "#cloud-config %s (%d bytes) is refused: %v", show(s), len(s), err)
		} else if err != nil {
			r.Add(p, CodeInvalid, "#cloud-config %s is not a valid YAML mapping (cloudbase-init would ignore it): %s", show(s), detail(err))
		} else if err := checkAliasing(d); err != nil {
			r.Add(p, CodeInvalid, "#cloud-config %s expands beyond reason: %s", show(s), detail(err))
		}
	case WinKindMultipart:
		if _, err := SplitMIME(s); err != nil {
			r.Add(p, CodeInvalid, "MIME user-data %s cannot be read: %s", show(s), detail(err))
		}
	}
	if k.IsScript() && j.UserDataMode != ModeReplace {
		r.Add(p, CodeConflict, "user_data_mode %s merges cloud-config, but this user-data is %s, which cloudbase-init takes as it is; set user_data_mode to \"replace\" to carry it verbatim", Quote(string(cmp.Or(j.UserDataMode, ModeMerge))), winKindNames[k])
	}
}

// ValidateWindowsSecretUserData is validateWindowsUserData for user-data
// read from secret name: the content is never quoted.
func ValidateWindowsSecretUserData(j *Job, field, name, s string) Report {
	var r Report
	show := func(string) string { return fmt.Sprintf("(content of secret %q, %d bytes)", name, len(s)) }
	validateWindowsUserData(j, field, s, show, redactParseError, &r)
	return r
}
