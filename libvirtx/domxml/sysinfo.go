package domxml

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/beevik/etree"
)

// systemd (252 and later) imports system credentials that the VM's
// firmware carries, in this order, the first of a name winning:
//
//   - QEMU fw_cfg entries opt/io.systemd.credentials/NAME, which libvirt
//     passes from <sysinfo type='fwcfg'><entry name='…' file='…'/>;
//   - SMBIOS type 11 OEM strings "io.systemd.credential:NAME=VALUE" or
//     "io.systemd.credential.binary:NAME=BASE64", which libvirt passes from
//     <sysinfo type='smbios'><oemStrings><entry>…</entry> when the domain
//     has <os><smbios mode='sysinfo'/>.
//
// libvirt puts OEM strings on QEMU's command line (-smbios type=11,value=…),
// which every host user can read in /proc: no secret goes there. The
// functions below add and remove the credentials vmpayload sets and keep
// everything else in the definition, the user's own sysinfo and OEM
// strings included. vmpayload knows its own entries by the names it
// recorded when it set them (owned): a credential of the same name that it
// did not set is the user's, and setting one over it is refused.

// OEM string prefixes systemd reads credentials from.
const (
	OEMCredentialPrefix       = "io.systemd.credential:"
	OEMBinaryCredentialPrefix = "io.systemd.credential.binary:"
)

// Room for OEM strings. QEMU 7.2 (Debian 12) builds x86 machines' SMBIOS
// with the 32-bit entry point, whose whole table is at most 65535 bytes
// ("SMBIOS 2.1 table length 66352 exceeds 65535" for one OEM string of
// 66000 bytes; the other tables of a one-vCPU pc machine took 328 bytes).
// MaxOEMStringBytes leaves 5535 bytes of that to the other tables (one
// type 4 per socket, one type 17 per 16 GiB of memory, ...); OEMStringBytes
// counts a string. SMBIOS's type 11 counts its strings in one byte.
const (
	MaxOEMStringBytes = 60000
	MaxOEMStrings     = 255
)

// CredentialFwCfgPrefix is the fw_cfg directory systemd imports
// credentials from; QEMU takes fw_cfg names of at most MaxFwCfgName
// characters ("name too long (max. 55 char)").
const (
	CredentialFwCfgPrefix = "opt/io.systemd.credentials/"
	MaxFwCfgName          = 55
)

// Credential is a system credential for the guest: a name and its bytes.
type Credential struct {
	Name  string
	Value []byte
}

// CredentialFile is a credential passed by fw_cfg: its name and the host
// file QEMU reads its value from.
type CredentialFile struct {
	Name string
	File string
}

// OEMCredential returns the OEM string that carries a credential: the text
// form when the value is printable UTF-8 without leading or trailing white
// space (which survives XML and QEMU's command line unchanged), else the
// binary form with the value in base64.
func OEMCredential(name string, value []byte) string {
	if textValue(value) {
		return OEMCredentialPrefix + name + "=" + string(value)
	}
	return OEMBinaryCredentialPrefix + name + "=" + base64.StdEncoding.EncodeToString(value)
}

func textValue(v []byte) bool {
	if !utf8.Valid(v) {
		return false
	}
	s := string(v)
	if strings.TrimSpace(s) != s {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError })
}

// OEMStringBytes is the room s takes in the SMBIOS table (its NUL
// included).
func OEMStringBytes(s string) int { return len(s) + 1 }

// OEMCredentialName returns the name of the credential an OEM string
// carries, and false for a string systemd does not read as one.
func OEMCredentialName(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, OEMCredentialPrefix)
	if !ok {
		rest, ok = strings.CutPrefix(s, OEMBinaryCredentialPrefix)
	}
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, "=")
	return name, ok
}

// smbiosSysinfo returns the root's <sysinfo type='smbios'>, or nil.
func smbiosSysinfo(root *etree.Element) *etree.Element {
	for _, s := range root.SelectElements("sysinfo") {
		if s.SelectAttrValue("type", "") == "smbios" {
			return s
		}
	}
	return nil
}

// oemEntries returns the <oemStrings><entry> elements of the smbios
// sysinfo in document order.
func oemEntries(root *etree.Element) []*etree.Element {
	s := smbiosSysinfo(root)
	if s == nil {
		return nil
	}
	var out []*etree.Element
	for _, o := range s.SelectElements("oemStrings") {
		out = append(out, o.SelectElements("entry")...)
	}
	return out
}

// SetSMBIOSCredentials puts creds into the document as SMBIOS OEM strings
// with <os><smbios mode='sysinfo'/>: entries of the credentials in owned
// (the names vmpayload set before) and of the names in creds are replaced,
// every other sysinfo element and OEM string is kept. It refuses a
// credential of the same name the user passes in an OEM string of their
// own (not in owned), a domain whose <smbios> mode is not "sysinfo" (the
// OEM strings would not reach the guest), and OEM strings beyond the room
// QEMU has for them (MaxOEMStringBytes, MaxOEMStrings, the user's own
// strings counted). A refused edit leaves the document as it was.
func (e *Edit) SetSMBIOSCredentials(creds []Credential, owned []string) error {
	if err := e.setSMBIOSCredentials(creds, owned); err != nil {
		return fmt.Errorf("setting SMBIOS credentials: %w", err)
	}
	return nil
}

func (e *Edit) setSMBIOSCredentials(creds []Credential, owned []string) error {
	root := e.root
	names := map[string]bool{}
	for _, c := range creds {
		if names[c.Name] {
			return fmt.Errorf("credential %q is given twice", c.Name)
		}
		names[c.Name] = true
	}
	osEl := root.SelectElement("os")
	if osEl == nil {
		return fmt.Errorf("the domain has no <os> element")
	}
	sm := osEl.SelectElement("smbios")
	if sm != nil && sm.SelectAttrValue("mode", "") != "sysinfo" {
		return fmt.Errorf("the domain's <os><smbios mode=%q/> does not pass <sysinfo> OEM strings to the guest; credentials need mode \"sysinfo\" (or use fw_cfg)", sm.SelectAttrValue("mode", ""))
	}
	// the entries vmpayload set go; the user's of the same name are
	// refused; every other string counts against the room
	var drop []*etree.Element
	count, size := 0, 0
	for _, en := range oemEntries(root) {
		n, ok := OEMCredentialName(en.Text())
		switch {
		case ok && slices.Contains(owned, n):
			drop = append(drop, en)
			continue
		case ok && names[n]:
			return fmt.Errorf("the domain already passes credential %q in an OEM string of its own; remove it or leave the credential out of the job", n)
		}
		count++
		size += OEMStringBytes(en.Text())
	}
	strs := make([]string, len(creds))
	for i, c := range creds {
		strs[i] = OEMCredential(c.Name, c.Value)
		count++
		size += OEMStringBytes(strs[i])
	}
	if len(creds) > 0 {
		if size > MaxOEMStringBytes {
			return fmt.Errorf("the OEM strings would take %d bytes, more than the %d QEMU's SMBIOS table has room for", size, MaxOEMStringBytes)
		}
		if count > MaxOEMStrings {
			return fmt.Errorf("the domain would have %d OEM strings; SMBIOS holds at most %d", count, MaxOEMStrings)
		}
	}
	// checked: now edit
	for _, en := range drop {
		removeEntry(en)
		e.changed = true
	}
	if len(creds) == 0 {
		if removeEmptySMBIOS(root) {
			e.changed = true
		}
		return nil
	}
	sys := smbiosSysinfo(root)
	if sys == nil {
		sys = etree.NewElement("sysinfo")
		sys.CreateAttr("type", "smbios")
		insertSysinfo(root, sys)
	}
	oem := sys.SelectElement("oemStrings")
	if oem == nil {
		oem = etree.NewElement("oemStrings")
		indentChild(sys, oem)
	}
	for _, s := range strs {
		en := etree.NewElement("entry")
		en.SetText(s)
		indentChild(oem, en)
	}
	if sm == nil {
		sm = etree.NewElement("smbios")
		sm.CreateAttr("mode", "sysinfo")
		indentChild(osEl, sm)
	}
	e.changed = true
	return nil
}

// RemoveSMBIOSCredentials removes the OEM strings of the credentials named
// in owned and returns the names it removed. An <oemStrings> and a
// <sysinfo type='smbios'> left empty go too, and then
// <os><smbios mode='sysinfo'/>, which libvirt refuses without an smbios
// sysinfo. Everything else is kept.
func (e *Edit) RemoveSMBIOSCredentials(owned []string) []string {
	var removed []string
	for _, en := range oemEntries(e.root) {
		if n, ok := OEMCredentialName(en.Text()); ok && slices.Contains(owned, n) {
			removeEntry(en)
			removed = append(removed, n)
		}
	}
	if len(removed) > 0 {
		removeEmptySMBIOS(e.root)
		e.changed = true
	}
	return removed
}

// removeEntry removes an OEM string entry and an <oemStrings> it leaves
// empty.
func removeEntry(e *etree.Element) {
	oem := e.Parent()
	removeWithIndent(oem, e)
	if onlySpace(oem) {
		removeWithIndent(oem.Parent(), oem)
	}
}

// removeEmptySMBIOS removes an smbios sysinfo left without children and
// then the <smbios mode='sysinfo'/> that would point at nothing; it
// reports whether it removed anything.
func removeEmptySMBIOS(root *etree.Element) bool {
	removed := false
	sys := smbiosSysinfo(root)
	if sys != nil && onlySpace(sys) && len(sys.Attr) == 1 {
		removeWithIndent(root, sys)
		sys, removed = nil, true
	}
	if sys != nil {
		return removed
	}
	if osEl := root.SelectElement("os"); osEl != nil {
		if sm := osEl.SelectElement("smbios"); sm != nil && sm.SelectAttrValue("mode", "") == "sysinfo" {
			removeWithIndent(osEl, sm)
			removed = true
		}
	}
	return removed
}

// CredentialFwCfgName is the fw_cfg name of a credential.
func CredentialFwCfgName(name string) string { return CredentialFwCfgPrefix + name }

// SetFwCfgCredentials puts one fw_cfg entry per credential in files into
// the document, opt/io.systemd.credentials/NAME naming the file; entries
// of credentials in owned that files no longer has are removed, every
// other fw_cfg entry and sysinfo is kept. It refuses a name over QEMU's 55
// characters, a file path a definition cannot name, and a credential of
// the same name the user passes in an fw_cfg entry of their own (not in
// owned); a refused edit leaves the document as it was.
func (e *Edit) SetFwCfgCredentials(files []CredentialFile, owned []string) error {
	want := map[string]bool{}
	for _, f := range files {
		fn := CredentialFwCfgName(f.Name)
		if len(fn) > MaxFwCfgName {
			return fmt.Errorf("setting fw_cfg credentials: %s has %d characters; QEMU takes at most %d", fn, len(fn), MaxFwCfgName)
		}
		if want[f.Name] {
			return fmt.Errorf("setting fw_cfg credentials: credential %q is given twice", f.Name)
		}
		if err := checkImagePath(f.File); err != nil {
			return fmt.Errorf("setting fw_cfg credentials: %w", err)
		}
		want[f.Name] = true
	}
	for _, en := range e.FwCfgEntries() {
		n, ok := strings.CutPrefix(en.Name, CredentialFwCfgPrefix)
		if ok && want[n] && !slices.Contains(owned, n) {
			return fmt.Errorf("setting fw_cfg credentials: the domain already passes credential %q in an fw_cfg entry of its own; remove it or leave the credential out of the job", n)
		}
	}
	e.RemoveFwCfgEntries(func(en FwCfgEntry) bool {
		n, ok := strings.CutPrefix(en.Name, CredentialFwCfgPrefix)
		return ok && slices.Contains(owned, n) && !want[n]
	})
	for _, f := range files {
		if _, err := e.SetFwCfgFile(f.File, CredentialFwCfgName(f.Name)); err != nil {
			return fmt.Errorf("setting fw_cfg credentials: %w", err)
		}
	}
	return nil
}

// RemoveFwCfgCredentials removes the fw_cfg entries of the credentials
// named in owned (and a fwcfg sysinfo left empty) and returns them (their
// files are the caller's to delete).
func (e *Edit) RemoveFwCfgCredentials(owned []string) []FwCfgEntry {
	return e.RemoveFwCfgEntries(func(en FwCfgEntry) bool {
		n, ok := strings.CutPrefix(en.Name, CredentialFwCfgPrefix)
		return ok && slices.Contains(owned, n)
	})
}
