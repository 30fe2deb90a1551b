package credentials

import (
	"encoding/base64"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

// maxFwCfgNameLen is the longest fw_cfg name QEMU takes ("name too long
// (max. 55 char)"): a credential name passed by fw_cfg has at most
// maxFwCfgNameLen - len(job.FwCfgCredentialPrefix) = 28 characters.
const maxFwCfgNameLen = 55

// maxNameLen is the longest credential name systemd accepts (a file
// name).
const maxNameLen = 255

// defaultDelivery is the job's credentials_delivery, or the default when it has
// none: "fwcfg" when it carries a secret, else "smbios".
func defaultDelivery(j *job.Job) job.CredentialsDelivery {
	if j.CredentialsDelivery != "" {
		return j.CredentialsDelivery
	}
	if len(secretFields(j)) > 0 {
		return job.CredentialsFwCfg
	}
	return job.CredentialsSMBIOS
}

// secretFields lists the fields of a credentials job whose values are
// secrets (root's password in any form, credential_secrets).
func secretFields(j *job.Job) []string {
	var out []string
	for i, u := range j.Users {
		if u.Name != "root" {
			continue
		}
		for _, f := range job.SetNames([]job.SetField{{Name: "password", Set: u.Password != ""}, {Name: "password_hash", Set: u.PasswordHash != ""}, {Name: "password_secret", Set: u.PasswordSecret != ""}}) {
			out = append(out, job.Index("users", i)+"."+f)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(j.CredentialSecrets)) {
		out = append(out, "credential_secrets."+k)
	}
	return out
}

// wellKnown are the system credentials systemd.system-credentials(7)
// names (systemd 262), used to catch misspelt names; docs/credentials.md
// lists the version that reads each.
var wellKnown = []string{
	"firstboot.hostname", "firstboot.keymap", "firstboot.locale", "firstboot.locale-messages", "firstboot.timezone",
	"fstab.extra", "getty.ttys.container", "getty.ttys.serial", "import.pull",
	"journal.forward_to_socket", "journal.storage", "login.issue", "login.motd",
	"network.dns", "network.hosts", "network.search_domains",
	"passwd.hashed-password.root", "passwd.plaintext-password.root", "passwd.shell.root",
	"shell.prompt.prefix", "shell.prompt.suffix", "shell.welcome",
	"ssh.authorized_keys.root", "ssh.ephemeral-authorized_keys-all", "ssh.listen",
	"sysctl.extra", "sysusers.extra", "system.hostname", "system.machine_id", "tmpfiles.extra",
	"vconsole.font", "vconsole.font_map", "vconsole.font_unimap", "vconsole.keymap", "vconsole.keymap_toggle",
	"vmm.notify_socket",
	"cryptsetup.passphrase", "cryptsetup.tpm2-pin", "cryptsetup.fido2-pin", "cryptsetup.pkcs11-pin", "cryptsetup.luks2-pin",
}

// wellKnownPrefixes are the credential families named by a prefix
// (network.network.50-foo becomes 50-foo.network).
var wellKnownPrefixes = []string{
	"home.add-signing-key.", "home.create.", "home.register.",
	"network.conf.", "network.link.", "network.netdev.", "network.network.", "network.wireguard.",
	"systemd.extra-unit.", "systemd.unit-dropin.", "udev.conf.", "udev.rules.",
	"userdb.group.", "userdb.user.",
}

// credentialNameProblem says what is wrong with a credential name, or "".
// systemd takes a valid file name of printable ASCII without ':'; SMBIOS
// strings split at the first '='; spaces would not survive the tmpfiles
// and XML forms, so they are refused too.
func credentialNameProblem(name string) string {
	switch {
	case name == "":
		return "a credential needs a name"
	case name == "." || name == "..":
		return "is not a credential name"
	case len(name) > maxNameLen:
		return "is longer than 255 characters"
	}
	for _, c := range name {
		switch {
		case c == '/':
			return "has a '/': a credential name is a file name"
		case c == '=':
			return "has a '=', which ends the name in an SMBIOS credential string"
		case c == ':':
			return "has a ':', which systemd refuses in a credential name"
		case c <= ' ' || c > '~':
			return "has a character other than printable ASCII (no spaces)"
		}
	}
	return ""
}

// nearMiss returns the well-known credential name (or family prefix) that
// name looks like a misspelling of, or "".
func nearMiss(name string) string {
	if slices.Contains(wellKnown, name) {
		return ""
	}
	for _, p := range wellKnownPrefixes {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return ""
		}
	}
	for _, w := range wellKnown {
		if strings.EqualFold(name, w) || similar(name, w) {
			return w
		}
	}
	// a family: compare the name's first two components with each prefix
	if i := strings.Index(name, "."); i >= 0 {
		if j := strings.Index(name[i+1:], "."); j >= 0 {
			head := name[:i+1+j+1]
			for _, p := range wellKnownPrefixes {
				if strings.EqualFold(head, p) || similar(head, p) {
					return p + "*"
				}
			}
		} else {
			for _, p := range wellKnownPrefixes {
				if strings.EqualFold(name+".", p) || similar(name+".", p) {
					return p + "*"
				}
			}
		}
	}
	return ""
}

// similar reports whether a and b are at most two edits apart (insert,
// delete, substitute, or swap two neighbours), '-' and '_' counting as
// equal, and both are long enough for that to mean a typo.
func similar(a, b string) bool {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	a, b = norm(a), norm(b)
	if a == b {
		return true
	}
	if len(a) < 6 || len(b) < 6 || max(len(a), len(b))-min(len(a), len(b)) > 2 {
		return false
	}
	return editDistance(a, b) <= 2
}

// editDistance is the optimal string alignment distance of a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range rb {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// generated returns the credential names the job's own fields produce,
// each with the field it comes from (FromJob produces exactly these).
func generated(j *job.Job) map[string]string {
	out := map[string]string{}
	if j.Hostname != "" {
		out["system.hostname"] = "hostname"
		out["firstboot.hostname"] = "hostname"
	}
	for _, c := range textCredentials(j) {
		if c.text != "" {
			out[c.name] = c.field
		}
	}
	if len(j.SSHAuthorizedKeys) > 0 {
		out["ssh.authorized_keys.root"] = "ssh_authorized_keys"
	}
	for i, u := range j.Users {
		if u.Name != "root" {
			continue // Check refuses other users
		}
		p := job.Index("users", i)
		if len(u.SSHAuthorizedKeys) > 0 {
			if _, ok := out["ssh.authorized_keys.root"]; !ok {
				out["ssh.authorized_keys.root"] = p + ".ssh_authorized_keys"
			}
		}
		switch {
		case u.PasswordHash != "":
			out["passwd.hashed-password.root"] = p + ".password_hash"
		case u.Password != "":
			out["passwd.plaintext-password.root"] = p + ".password"
		case u.PasswordSecret != "":
			out["passwd.plaintext-password.root"] = p + ".password_secret"
		}
	}
	if j.DNS != nil {
		if len(j.DNS.Nameservers) > 0 {
			out["network.dns"] = "dns.nameservers"
		}
		if len(j.DNS.Search) > 0 {
			out["network.search_domains"] = "dns.search"
		}
	}
	for i, n := range j.NICs {
		out[nicNetwork(i)] = job.Index("nics", i)
		if n.Name != "" {
			out[nicLink(i)] = job.Index("nics", i) + ".name"
		}
	}
	if len(j.Files) > 0 {
		out["tmpfiles.extra"] = "files"
	}
	return out
}

// nicNetwork is the credential carrying nics[i]'s
// systemd.network file (systemd-network-generator writes
// /run/systemd/network/50-nicI.network from it). The name is short so that
// its fw_cfg name stays within QEMU's 55 characters.
func nicNetwork(i int) string { return "network.network.50-nic" + strconv.Itoa(i) }

// nicLink is the credential carrying nics[i]'s systemd.link
// file, which names the interface.
func nicLink(i int) string { return "network.link.50-nic" + strconv.Itoa(i) }

// Check checks a job of format "credentials": it refuses every field no
// system credential carries (the field table, payload/kinds, has the
// reasons) and checks the credentials fields.
func (kind) Check(j *job.Job, r *job.Report) {
	kinds.Refuse(j, kinds.Credentials, true, r)
	if j.GuestOS == job.GuestWindows {
		r.Add("guest_os", job.CodeConflict, "format \"credentials\" is read by systemd: guest_os must be \"linux\" or left out")
	}
	delivery := defaultDelivery(j)
	switch delivery {
	case job.CredentialsSMBIOS, job.CredentialsFwCfg:
	default:
		r.Add("credentials_delivery", job.CodeInvalid, "%s is not a credentials delivery; use \"smbios\" or \"fwcfg\"", job.Quote(string(delivery)))
	}
	if delivery == job.CredentialsSMBIOS {
		for _, f := range secretFields(j) {
			r.Add(f, job.CodeConflict, "a secret cannot go by SMBIOS: libvirt puts OEM strings on QEMU's command line, which every host user can read; set credentials_delivery \"fwcfg\"")
		}
	}
	if j.Hostname != "" && len(strings.TrimSuffix(j.Hostname, ".")) > 64 {
		r.Add("hostname", job.CodeInvalid, "%s is longer than 64 characters, the most systemd sets as a host name", job.Quote(j.Hostname))
	}
	for _, f := range []struct{ name, v string }{{"locale", j.Locale}, {"keymap", j.Keymap}} {
		if f.v != "" && (strings.ContainsFunc(f.v, func(c rune) bool { return c <= ' ' || c == 0x7f }) || !utf8.ValidString(f.v)) {
			r.Add(f.name, job.CodeInvalid, "%s is not a single word such as %s", job.Quote(f.v), map[string]string{"locale": `"de_DE.UTF-8"`, "keymap": `"de-latin1"`}[f.name])
		}
	}
	for _, f := range []struct{ name, v string }{{"motd", j.Motd}, {"issue", j.Issue}} {
		if strings.ContainsRune(f.v, 0) {
			r.Add(f.name, job.CodeInvalid, "the text contains a NUL character, which a credential file written by tmpfiles cannot hold")
		}
	}
	for i, u := range j.Users {
		p := job.Index("users", i)
		if u.Name != "root" {
			if u.Name != "" {
				r.Add(p+".name", job.CodeConflict, "format \"credentials\" configures root only (passwd.*.root, ssh.authorized_keys.root), not %s; create other users with a sysusers.extra credential", job.Quote(u.Name))
			}
			continue
		}
		for _, f := range job.SetNames([]job.SetField{{Name: "sudo", Set: u.Sudo != ""}, {Name: "groups", Set: len(u.Groups) > 0}, {Name: "lock_password", Set: u.LockPassword != nil}}) {
			r.Add(p+"."+f, job.CodeConflict, "format \"credentials\" cannot carry %s for root: no system credential sets it", f)
		}
	}
	for i, f := range j.Files {
		p := job.Index("files", i)
		if strings.ContainsAny(f.Path, "\"\\") {
			r.Add(p+".path", job.CodeInvalid, "%s has a '\"' or '\\', which a tmpfiles.extra line cannot hold", job.Quote(f.Path))
		}
		content := []byte(f.Content)
		if f.Encoding == job.EncodingBase64 {
			content, _ = base64.StdEncoding.DecodeString(f.Content) // validateFiles reports bad base64
		}
		if slices.Contains(content, 0) {
			r.Add(p+".content", job.CodeInvalid, "the content has a NUL byte, which systemd-tmpfiles cannot write (tmpfiles.extra)")
		}
	}
	gen := generated(j)
	names := map[string]string{} // credential name → the field giving it
	for n, f := range gen {
		names[n] = f
	}
	check := func(p, name string) {
		if why := credentialNameProblem(name); why != "" {
			r.Add(p, job.CodeInvalid, "%s %s", job.Quote(name), why)
			return
		}
		if w := nearMiss(name); w != "" {
			r.Add(p, job.CodeInvalid, "%s is not a credential systemd reads, but looks like %s; correct the spelling", job.Quote(name), job.Quote(w))
		}
		if by, dup := names[name]; dup {
			r.Add(p, job.CodeConflict, "credential %s is already set by %s", job.Quote(name), by)
		}
		if delivery == job.CredentialsFwCfg && len(job.FwCfgCredentialPrefix)+len(name) > maxFwCfgNameLen {
			r.Add(p, job.CodeInvalid, "credential name %s is too long for fw_cfg: %s%s has %d characters, QEMU takes at most %d", job.Quote(name), job.FwCfgCredentialPrefix, name, len(job.FwCfgCredentialPrefix)+len(name), maxFwCfgNameLen)
		}
		names[name] = p
	}
	for _, k := range slices.Sorted(maps.Keys(j.Credentials)) {
		p := "credentials." + k
		check(p, k)
		v := j.Credentials[k]
		if v.Binary {
			if _, err := base64.StdEncoding.DecodeString(v.Base64); err != nil {
				r.Add(p+".base64", job.CodeInvalid, "the value is not valid base64: %v", err)
			}
		} else if strings.ContainsRune(v.Text, 0) {
			r.Add(p, job.CodeInvalid, "the text has a NUL character; give a binary value as {\"base64\": \"...\"}")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(j.CredentialSecrets)) {
		p := "credential_secrets." + k
		check(p, k)
		job.CheckSecretName(p, j.CredentialSecrets[k], r)
	}
	if delivery == job.CredentialsFwCfg {
		for _, n := range slices.Sorted(maps.Keys(gen)) {
			if len(job.FwCfgCredentialPrefix)+len(n) > maxFwCfgNameLen {
				hint := ""
				if n == "passwd.plaintext-password.root" {
					hint = "; give root's password as password_hash, or a hash as credential_secrets \"passwd.hashed-password.root\" (that name fits)"
				}
				r.Add(gen[n], job.CodeInvalid, "its credential %s is too long for fw_cfg (%d characters with %s; QEMU takes %d)%s", job.Quote(n), len(job.FwCfgCredentialPrefix)+len(n), job.FwCfgCredentialPrefix, maxFwCfgNameLen, hint)
			}
		}
	}
}
