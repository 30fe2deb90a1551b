// Package credentials is the payload kind of format "credentials": it maps
// a job to the systemd system credentials (systemd.system-credentials(7))
// that carry its settings to a guest without cloud-init. The credentials
// travel in the domain definition itself, as SMBIOS OEM strings or QEMU
// fw_cfg files (libvirtx/domxml sysinfo.go); docs/credentials.md says which
// systemd version reads which credential.
//
// The mapping is pure: a job (validated, defaults applied) and a way to
// read secrets give a list of credentials, the same each time.
package credentials

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/job"
)

// Credential is one system credential for the guest.
type Credential struct {
	// Name is the credential's name ("system.hostname").
	Name string
	// Value is its content, byte for byte.
	Value []byte
	// Secret marks a value that must not go where host users can read it
	// (SMBIOS, which libvirt puts on QEMU's command line).
	Secret bool
	// Field is the job field the credential comes from, for messages.
	Field string
}

// SecretReader reads a named secret (payload/secrets.Dir is one).
type SecretReader interface {
	Read(name string) ([]byte, error)
}

// Limits systemd puts on imported credentials (src/basic/creds-util.h's
// CREDENTIAL_SIZE_MAX and CREDENTIALS_TOTAL_SIZE_MAX, 252 to 262): it
// skips a credential above the first and every credential once the
// second is reached.
const (
	MaxCredentialBytes = 1 << 20
	MaxTotalBytes      = 1 << 20
)

// FromJob returns the credentials of j, sorted by name. j is a job of
// format "credentials" that passed job.Validate; sr reads the secrets it
// names (nil when it names none). An error names the field whose secret
// could not be read (never the secret's content).
func FromJob(j *job.Job, sr SecretReader) ([]Credential, error) {
	var out []Credential
	add := func(name, field string, v []byte, secret bool) {
		out = append(out, Credential{Name: name, Value: v, Secret: secret, Field: field})
	}
	if j.Hostname != "" {
		h := strings.TrimSuffix(j.Hostname, ".")
		// system.hostname (254+) sets the transient host name at every
		// boot unless /etc/hostname names one; firstboot.hostname (later
		// than 257) writes /etc/hostname on the first boot
		add("system.hostname", "hostname", []byte(h), false)
		add("firstboot.hostname", "hostname", []byte(h), false)
	}
	for _, c := range textCredentials(j) {
		if c.text != "" {
			add(c.name, c.field, []byte(c.text), false)
		}
	}
	keys := slices.Clone(j.SSHAuthorizedKeys)
	keysField := "ssh_authorized_keys"
	for i, u := range j.Users {
		if u.Name != "root" {
			continue
		}
		p := fmt.Sprintf("users[%d]", i)
		if len(u.SSHAuthorizedKeys) > 0 && len(keys) == 0 {
			keysField = p + ".ssh_authorized_keys"
		}
		keys = append(keys, u.SSHAuthorizedKeys...)
		switch {
		case u.PasswordHash != "":
			add("passwd.hashed-password.root", p+".password_hash", []byte(u.PasswordHash), true)
		case u.Password != "":
			add("passwd.plaintext-password.root", p+".password", []byte(u.Password), true)
		case u.PasswordSecret != "":
			b, err := readSecret(sr, p+".password_secret", u.PasswordSecret)
			if err != nil {
				return nil, err
			}
			// the first line, as the other formats take a password secret
			pw, _, _ := strings.Cut(strings.TrimRight(string(b), "\r\n"), "\n")
			add("passwd.plaintext-password.root", p+".password_secret", []byte(strings.TrimRight(pw, "\r")), true)
		}
	}
	if len(keys) > 0 {
		add("ssh.authorized_keys.root", keysField, []byte(strings.Join(keys, "\n")+"\n"), false)
	}
	if j.DNS != nil {
		if len(j.DNS.Nameservers) > 0 {
			add("network.dns", "dns.nameservers", []byte(strings.Join(j.DNS.Nameservers, " ")), false)
		}
		if len(j.DNS.Search) > 0 {
			add("network.search_domains", "dns.search", []byte(strings.Join(j.DNS.Search, " ")), false)
		}
	}
	for i, n := range j.NICs {
		p := fmt.Sprintf("nics[%d]", i)
		add(nicNetwork(i), p, networkFile(n), false)
		if n.Name != "" {
			add(nicLink(i), p+".name", linkFile(n), false)
		}
	}
	if len(j.Files) > 0 {
		b, err := tmpfilesLines(j.Files)
		if err != nil {
			return nil, err
		}
		add("tmpfiles.extra", "files", b, false)
	}
	for name, v := range j.Credentials {
		add(name, "credentials."+name, v.Bytes(), false)
	}
	for name, secret := range j.CredentialSecrets {
		f := "credential_secrets." + name
		b, err := readSecret(sr, f, secret)
		if err != nil {
			return nil, err
		}
		add(name, f, b, true)
	}
	slices.SortFunc(out, func(a, b Credential) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// textCredentials are the credentials that carry a text field of j as it
// is, each with its field.
func textCredentials(j *job.Job) []struct{ name, field, text string } {
	return []struct{ name, field, text string }{
		{"firstboot.timezone", "timezone", j.Timezone}, {"firstboot.locale", "locale", j.Locale},
		{"firstboot.keymap", "keymap", j.Keymap}, {"login.motd", "motd", j.Motd}, {"login.issue", "issue", j.Issue},
	}
}

func readSecret(sr SecretReader, field, name string) ([]byte, error) {
	if sr == nil {
		return nil, fmt.Errorf("%s: secret %q cannot be read: no secrets directory", field, name)
	}
	b, err := sr.Read(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return b, nil
}

// networkFile is the systemd.network file of a NIC for
// systemd-network-generator, matched by MAC address.
func networkFile(n job.NIC) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "[Match]\nMACAddress=%s\n", strings.ToLower(n.MAC))
	if n.MTU != 0 {
		fmt.Fprintf(&b, "\n[Link]\nMTUBytes=%d\n", n.MTU)
	}
	b.WriteString("\n[Network]\n")
	v4 := n.IPv4 != nil && n.IPv4.Method == job.MethodDHCP
	v6 := n.IPv6 != nil && n.IPv6.Method == job.MethodDHCP
	switch {
	case v4 && v6:
		b.WriteString("DHCP=yes\n")
	case v4:
		b.WriteString("DHCP=ipv4\n")
	case v6:
		b.WriteString("DHCP=ipv6\n")
	}
	if n.IPv6 != nil {
		switch n.IPv6.Method {
		case job.MethodSLAAC:
			b.WriteString("IPv6AcceptRA=yes\n")
		case job.MethodStatic, job.MethodNone:
			b.WriteString("IPv6AcceptRA=no\n")
		}
	}
	for _, c := range []*job.IPConfig{n.IPv4, n.IPv6} {
		if c != nil && c.Method == job.MethodStatic {
			fmt.Fprintf(&b, "Address=%s\n", c.Address)
			if c.Gateway != "" {
				fmt.Fprintf(&b, "Gateway=%s\n", c.Gateway)
			}
		}
	}
	return b.Bytes()
}

// linkFile is the systemd.link file that names a NIC.
func linkFile(n job.NIC) []byte {
	return fmt.Appendf(nil, "[Match]\nMACAddress=%s\n\n[Link]\nName=%s\n", strings.ToLower(n.MAC), n.Name)
}

// tmpfilesLines renders the job's files as tmpfiles.d lines of type "f":
// systemd-tmpfiles creates each file (and its parent directories) when it
// is missing, with the content as the line's argument. Checked with
// systemd-tmpfiles 252: the argument's C escapes are undone after
// specifiers are expanded, so every byte outside printable ASCII, the space
// and the backslash are written as \xNN, and '%' as "%%"; a NUL cannot be
// written (job.Validate refuses it). The path field has no escapes: a path
// with a space is quoted.
func tmpfilesLines(files []job.File) ([]byte, error) {
	var b bytes.Buffer
	for i, f := range files {
		content := []byte(f.Content)
		if f.Encoding == job.EncodingBase64 {
			var err error
			if content, err = base64.StdEncoding.DecodeString(f.Content); err != nil {
				return nil, fmt.Errorf("files[%d].content: %w", i, err)
			}
		}
		mode := "-"
		if f.Permissions != "" {
			mode = f.Permissions
		}
		user, group := "-", "-"
		if f.Owner != "" {
			user, group, _ = strings.Cut(f.Owner, ":")
		}
		path := strings.ReplaceAll(f.Path, "%", "%%")
		if strings.ContainsAny(path, " \t") {
			path = `"` + path + `"`
		}
		fmt.Fprintf(&b, "f %s %s %s %s - %s\n", path, mode, user, group, escapeArg(content))
	}
	return b.Bytes(), nil
}

func escapeArg(content []byte) string {
	var s strings.Builder
	for _, c := range content {
		switch {
		case c == '%':
			s.WriteString("%%")
		case c <= ' ' || c >= 0x7f || c == '\\':
			fmt.Fprintf(&s, "\\x%02x", c)
		default:
			s.WriteByte(c)
		}
	}
	return s.String()
}

// Check reports the limits the credentials of a job break on their way to
// the guest, each naming the job field: systemd's size limits, and for
// SMBIOS the room QEMU gives OEM strings (domxml.MaxOEMStringBytes,
// domxml.MaxOEMStrings).
func Check(creds []Credential, d job.CredentialsDelivery) []job.FieldError {
	var errs []job.FieldError
	total := 0
	for _, c := range creds {
		total += len(c.Value)
		if len(c.Value) > MaxCredentialBytes {
			errs = append(errs, job.FieldError{Field: c.Field, Code: job.CodeTooLarge,
				Message: fmt.Sprintf("credential %q has %d bytes; systemd skips a credential over %d", c.Name, len(c.Value), MaxCredentialBytes)})
		}
	}
	if total > MaxTotalBytes {
		errs = append(errs, job.FieldError{Code: job.CodeTooLarge,
			Message: fmt.Sprintf("the credentials add up to %d bytes; systemd imports at most %d", total, MaxTotalBytes)})
	}
	if d == job.CredentialsSMBIOS {
		n := 0
		for _, c := range creds {
			n += domxml.OEMStringBytes(domxml.OEMCredential(c.Name, c.Value))
		}
		if n > domxml.MaxOEMStringBytes {
			errs = append(errs, job.FieldError{Field: "credentials_delivery", Code: job.CodeTooLarge,
				Message: fmt.Sprintf("the credentials take %d bytes of SMBIOS OEM strings; QEMU's SMBIOS table leaves room for %d: use credentials_delivery \"fwcfg\"", n, domxml.MaxOEMStringBytes)})
		}
		if len(creds) > domxml.MaxOEMStrings {
			errs = append(errs, job.FieldError{Field: "credentials_delivery", Code: job.CodeTooLarge,
				Message: fmt.Sprintf("%d credentials are more OEM strings than SMBIOS holds (%d): use credentials_delivery \"fwcfg\"", len(creds), domxml.MaxOEMStrings)})
		}
	}
	return errs
}
