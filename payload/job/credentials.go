package job

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// CredentialsDelivery is how a job of format "credentials" reaches the
// guest (docs/credentials.md).
type CredentialsDelivery string

// Credential deliveries.
const (
	// CredentialsSMBIOS puts each credential in an SMBIOS type 11 OEM
	// string (libvirt's <sysinfo type='smbios'><oemStrings>). libvirt
	// passes them on QEMU's command line, which every host user can read,
	// so secrets are refused.
	CredentialsSMBIOS CredentialsDelivery = "smbios"
	// CredentialsFwCfg puts each credential in a file behind a QEMU
	// fw_cfg entry opt/io.systemd.credentials/NAME.
	CredentialsFwCfg CredentialsDelivery = "fwcfg"
)

// FwCfgCredentialPrefix is the fw_cfg directory systemd (252 and later)
// imports credentials from.
const FwCfgCredentialPrefix = "opt/io.systemd.credentials/"

// MaxFwCfgNameLen is the longest fw_cfg name QEMU takes ("name too long
// (max. 55 char)"): a credential name passed by fw_cfg has at most
// MaxFwCfgNameLen - len(FwCfgCredentialPrefix) = 28 characters.
const MaxFwCfgNameLen = 55

// MaxCredentialNameLen is the longest credential name systemd accepts (a
// file name).
const MaxCredentialNameLen = 255

// CredentialValue is one value of the job's credentials map: text (a JSON
// string) or binary (a JSON object {"base64": "..."}).
type CredentialValue struct {
	Text   string
	Base64 string
	// Binary is true for the {"base64": ...} form.
	Binary bool
}

// Bytes returns the value's bytes; a binary value that is not base64
// gives nil (Validate reports it).
func (v CredentialValue) Bytes() []byte {
	if !v.Binary {
		return []byte(v.Text)
	}
	b, err := base64.StdEncoding.DecodeString(v.Base64)
	if err != nil {
		return nil
	}
	return b
}

// MarshalJSON writes the value back in the shape it was given.
func (v CredentialValue) MarshalJSON() ([]byte, error) {
	if v.Binary {
		return json.Marshal(map[string]string{"base64": v.Base64})
	}
	return json.Marshal(v.Text)
}

// Credentials is the job's credentials map, credential name → value.
type Credentials map[string]CredentialValue

func (c *Credentials) decodeJSON(v any, path string, r *Report) {
	obj, ok := v.(*object)
	if !ok {
		r.Add(path, CodeType, "expected an object (credential name → value), got %s", describe(v))
		return
	}
	m := Credentials{}
	for _, k := range obj.keys {
		p := join(path, k)
		switch t := obj.values[k].(type) {
		case string:
			m[k] = CredentialValue{Text: t}
		case *object:
			if len(t.keys) != 1 || t.keys[0] != "base64" {
				r.Add(p, CodeType, "expected a string (text) or an object {\"base64\": \"...\"} (binary), got an object with keys %s", quote(strings.Join(t.keys, ", ")))
				continue
			}
			s, ok := t.values["base64"].(string)
			if !ok {
				r.Add(join(p, "base64"), CodeType, "expected a string, got %s", describe(t.values["base64"]))
				continue
			}
			m[k] = CredentialValue{Base64: s, Binary: true}
		default:
			r.Add(p, CodeType, "expected a string (text) or an object {\"base64\": \"...\"} (binary), got %s", describe(t))
		}
	}
	*c = m
}

// CredentialSecrets maps a credential name to the name of the secret
// whose content becomes it.
type CredentialSecrets map[string]string

func (c *CredentialSecrets) decodeJSON(v any, path string, r *Report) {
	obj, ok := v.(*object)
	if !ok {
		r.Add(path, CodeType, "expected an object (credential name → secret name), got %s", describe(v))
		return
	}
	m := CredentialSecrets{}
	for _, k := range obj.keys {
		s, ok := obj.values[k].(string)
		if !ok {
			r.Add(join(path, k), CodeType, "expected a string (a secret name), got %s", describe(obj.values[k]))
			continue
		}
		m[k] = s
	}
	*c = m
}

// DefaultCredentialsDelivery is the job's credentials_delivery, or the
// default when it has none: "fwcfg" when it carries a secret, else "smbios".
func (j *Job) DefaultCredentialsDelivery() CredentialsDelivery {
	if j.CredentialsDelivery != "" {
		return j.CredentialsDelivery
	}
	if len(j.credentialSecretFields()) > 0 {
		return CredentialsFwCfg
	}
	return CredentialsSMBIOS
}

// credentialSecretFields lists the fields of a credentials job whose
// values are secrets (root's password in any form, credential_secrets).
func (j *Job) credentialSecretFields() []string {
	var out []string
	for i, u := range j.Users {
		if u.Name != "root" {
			continue
		}
		for _, f := range []struct {
			name string
			set  bool
		}{{"password", u.Password != ""}, {"password_hash", u.PasswordHash != ""}, {"password_secret", u.PasswordSecret != ""}} {
			if f.set {
				out = append(out, join(index("users", i), f.name))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(j.CredentialSecrets)) {
		out = append(out, join("credential_secrets", k))
	}
	return out
}

// WellKnownCredentials are the system credentials systemd.system-credentials(7)
// names (systemd 262), used to catch misspelt names; docs/credentials.md
// lists the version that reads each.
var WellKnownCredentials = []string{
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

// WellKnownCredentialPrefixes are the credential families named by a prefix
// (network.network.50-foo becomes 50-foo.network).
var WellKnownCredentialPrefixes = []string{
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
	case len(name) > MaxCredentialNameLen:
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
	if slices.Contains(WellKnownCredentials, name) {
		return ""
	}
	for _, p := range WellKnownCredentialPrefixes {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return ""
		}
	}
	for _, w := range WellKnownCredentials {
		if strings.EqualFold(name, w) || similar(name, w) {
			return w
		}
	}
	// a family: compare the name's first two components with each prefix
	if i := strings.Index(name, "."); i >= 0 {
		if j := strings.Index(name[i+1:], "."); j >= 0 {
			head := name[:i+1+j+1]
			for _, p := range WellKnownCredentialPrefixes {
				if strings.EqualFold(head, p) || similar(head, p) {
					return p + "*"
				}
			}
		} else {
			for _, p := range WellKnownCredentialPrefixes {
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
	if len(a) < 6 || len(b) < 6 || abs(len(a)-len(b)) > 2 {
		return false
	}
	return editDistance(a, b) <= 2
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
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

// GeneratedCredentials returns the credential names the job's own fields
// produce, each with the field it comes from (the mapping in
// payload/kinds/credentials produces exactly these).
func (j *Job) GeneratedCredentials() map[string]string {
	out := map[string]string{}
	if j.Hostname != "" {
		out["system.hostname"] = "hostname"
		out["firstboot.hostname"] = "hostname"
	}
	if j.Timezone != "" {
		out["firstboot.timezone"] = "timezone"
	}
	if j.Locale != "" {
		out["firstboot.locale"] = "locale"
	}
	if j.Keymap != "" {
		out["firstboot.keymap"] = "keymap"
	}
	if j.Motd != "" {
		out["login.motd"] = "motd"
	}
	if j.Issue != "" {
		out["login.issue"] = "issue"
	}
	if len(j.SSHAuthorizedKeys) > 0 {
		out["ssh.authorized_keys.root"] = "ssh_authorized_keys"
	}
	for i, u := range j.Users {
		if u.Name != "root" {
			continue // validateCredentials refuses other users
		}
		p := index("users", i)
		if len(u.SSHAuthorizedKeys) > 0 {
			if _, ok := out["ssh.authorized_keys.root"]; !ok {
				out["ssh.authorized_keys.root"] = join(p, "ssh_authorized_keys")
			}
		}
		switch {
		case u.PasswordHash != "":
			out["passwd.hashed-password.root"] = join(p, "password_hash")
		case u.Password != "":
			out["passwd.plaintext-password.root"] = join(p, "password")
		case u.PasswordSecret != "":
			out["passwd.plaintext-password.root"] = join(p, "password_secret")
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
		out[NICNetworkCredential(i)] = index("nics", i)
		if n.Name != "" {
			out[NICLinkCredential(i)] = join(index("nics", i), "name")
		}
	}
	if len(j.Files) > 0 {
		out["tmpfiles.extra"] = "files"
	}
	return out
}

// NICNetworkCredential is the credential carrying nics[i]'s
// systemd.network file (systemd-network-generator writes
// /run/systemd/network/50-nicI.network from it). The name is short so that
// its fw_cfg name stays within QEMU's 55 characters.
func NICNetworkCredential(i int) string { return "network.network.50-nic" + itoa(i) }

// NICLinkCredential is the credential carrying nics[i]'s systemd.link
// file, which names the interface.
func NICLinkCredential(i int) string { return "network.link.50-nic" + itoa(i) }

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// validateCredentials checks the credentials fields and, for a job of
// format "credentials", refuses every field no system credential carries
// (the field table, payload/kinds, has the reasons).
func validateCredentials(j *Job, r *Report) {
	if j.Format != FormatCredentials {
		table().Refuse(j, "credentials", false, r)
		return
	}
	table().Refuse(j, "credentials", true, r)
	if j.GuestOS == GuestWindows {
		r.Add("guest_os", CodeConflict, "format \"credentials\" is read by systemd: guest_os must be \"linux\" or left out")
	}
	delivery := j.DefaultCredentialsDelivery()
	switch delivery {
	case CredentialsSMBIOS, CredentialsFwCfg:
	default:
		r.Add("credentials_delivery", CodeInvalid, "%s is not a credentials delivery; use \"smbios\" or \"fwcfg\"", quote(string(delivery)))
	}
	if delivery == CredentialsSMBIOS {
		for _, f := range j.credentialSecretFields() {
			r.Add(f, CodeConflict, "a secret cannot go by SMBIOS: libvirt puts OEM strings on QEMU's command line, which every host user can read; set credentials_delivery \"fwcfg\"")
		}
	}
	if j.Hostname != "" && len(strings.TrimSuffix(j.Hostname, ".")) > 64 {
		r.Add("hostname", CodeInvalid, "%s is longer than 64 characters, the most systemd sets as a host name", quote(j.Hostname))
	}
	for _, f := range []struct{ name, v string }{{"locale", j.Locale}, {"keymap", j.Keymap}} {
		if f.v != "" && (strings.ContainsFunc(f.v, func(c rune) bool { return c <= ' ' || c == 0x7f }) || !utf8.ValidString(f.v)) {
			r.Add(f.name, CodeInvalid, "%s is not a single word such as %s", quote(f.v), map[string]string{"locale": `"de_DE.UTF-8"`, "keymap": `"de-latin1"`}[f.name])
		}
	}
	for _, f := range []struct{ name, v string }{{"motd", j.Motd}, {"issue", j.Issue}} {
		if strings.ContainsRune(f.v, 0) {
			r.Add(f.name, CodeInvalid, "the text contains a NUL character, which a credential file written by tmpfiles cannot hold")
		}
	}
	for i, u := range j.Users {
		p := index("users", i)
		if u.Name != "root" {
			if u.Name != "" {
				r.Add(join(p, "name"), CodeConflict, "format \"credentials\" configures root only (passwd.*.root, ssh.authorized_keys.root), not %s; create other users with a sysusers.extra credential", quote(u.Name))
			}
			continue
		}
		for _, f := range []struct {
			name string
			set  bool
		}{{"sudo", u.Sudo != ""}, {"groups", len(u.Groups) > 0}, {"lock_password", u.LockPassword != nil}} {
			if f.set {
				r.Add(join(p, f.name), CodeConflict, "format \"credentials\" cannot carry %s for root: no system credential sets it", f.name)
			}
		}
	}
	for i, f := range j.Files {
		p := index("files", i)
		if strings.ContainsAny(f.Path, "\"\\") {
			r.Add(join(p, "path"), CodeInvalid, "%s has a '\"' or '\\', which a tmpfiles.extra line cannot hold", quote(f.Path))
		}
		content := []byte(f.Content)
		if f.Encoding == EncodingBase64 {
			content, _ = base64.StdEncoding.DecodeString(f.Content) // validateFiles reports bad base64
		}
		if slices.Contains(content, 0) {
			r.Add(join(p, "content"), CodeInvalid, "the content has a NUL byte, which systemd-tmpfiles cannot write (tmpfiles.extra)")
		}
	}
	gen := j.GeneratedCredentials()
	names := map[string]string{} // credential name → the field giving it
	for n, f := range gen {
		names[n] = f
	}
	check := func(p, name string) {
		if why := credentialNameProblem(name); why != "" {
			r.Add(p, CodeInvalid, "%s %s", quote(name), why)
			return
		}
		if w := nearMiss(name); w != "" {
			r.Add(p, CodeInvalid, "%s is not a credential systemd reads, but looks like %s; correct the spelling", quote(name), quote(w))
		}
		if by, dup := names[name]; dup {
			r.Add(p, CodeConflict, "credential %s is already set by %s", quote(name), by)
		}
		if delivery == CredentialsFwCfg && len(FwCfgCredentialPrefix)+len(name) > MaxFwCfgNameLen {
			r.Add(p, CodeInvalid, "credential name %s is too long for fw_cfg: %s%s has %d characters, QEMU takes at most %d", quote(name), FwCfgCredentialPrefix, name, len(FwCfgCredentialPrefix)+len(name), MaxFwCfgNameLen)
		}
		names[name] = p
	}
	for _, k := range slices.Sorted(maps.Keys(j.Credentials)) {
		p := join("credentials", k)
		check(p, k)
		v := j.Credentials[k]
		if v.Binary {
			if _, err := base64.StdEncoding.DecodeString(v.Base64); err != nil {
				r.Add(join(p, "base64"), CodeInvalid, "the value is not valid base64: %v", err)
			}
		} else if strings.ContainsRune(v.Text, 0) {
			r.Add(p, CodeInvalid, "the text has a NUL character; give a binary value as {\"base64\": \"...\"}")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(j.CredentialSecrets)) {
		p := join("credential_secrets", k)
		check(p, k)
		validateSecretName(p, j.CredentialSecrets[k], r)
	}
	if delivery == CredentialsFwCfg {
		for _, n := range slices.Sorted(maps.Keys(gen)) {
			if len(FwCfgCredentialPrefix)+len(n) > MaxFwCfgNameLen {
				hint := ""
				if n == "passwd.plaintext-password.root" {
					hint = "; give root's password as password_hash, or a hash as credential_secrets \"passwd.hashed-password.root\" (that name fits)"
				}
				r.Add(gen[n], CodeInvalid, "its credential %s is too long for fw_cfg (%d characters with %s; QEMU takes %d)%s", quote(n), len(FwCfgCredentialPrefix)+len(n), FwCfgCredentialPrefix, MaxFwCfgNameLen, hint)
			}
		}
	}
}
