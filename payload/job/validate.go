package job

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // a fallback zoneinfo database for hosts without one
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/image"
	"golang.org/x/crypto/ssh"
)

// Limits on individual fields.
const (
	MaxContentBytes = image.MaxContentBytes // all content that ends up in an image
	maxNameLen      = 128
)

// The name forms the validator checks. Each is compiled at its first use,
// not at the start of every subcommand (`vmpayload version` needs none).
var (
	userRE   = LazyRegexp(`^[a-z_][a-z0-9_-]{0,31}$`)                 // user and group names
	ifnameRE = LazyRegexp(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$`)       // interface names
	labelRE  = LazyRegexp(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`) // one DNS label; the caller checks its 63 bytes
	macRE    = LazyRegexp(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$`)
	permRE   = LazyRegexp(`^0?[0-7]{3,4}$`)
	secretRE = LazyRegexp(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`) // the characters of a secret name
	// cryptRE matches the crypt(3) hash forms Linux guests understand: $1$
	// (MD5), $5$ (SHA-256), $6$ (SHA-512), $2a/b/y$ (bcrypt), $y$/$gy$
	// (yescrypt), $7$ (scrypt).
	cryptRE = LazyRegexp(`^\$(1|5|6|2[aby]|y|gy|7)\$[./A-Za-z0-9$=,]+$`)
)

// LazyRegexp compiles a regexp at its first use, not at process start.
func LazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// Validate checks every field of the job and returns a report of all
// problems. It does not touch the filesystem (secrets are resolved when the
// payload is built) and does not need libvirt.
func (j *Job) Validate() Report {
	var r Report
	if j.Version == 0 {
		r.Add("version", CodeRequired, "version is missing (or 0); it is required and must be %d", Version)
	} else if j.Version != Version {
		r.Add("version", CodeUnsupported, "job format version %d is not supported; this agent reads version %d", j.Version, Version)
	}
	if j.ID != "" && !ValidID(j.ID) {
		r.Add("id", CodeInvalid, "%s is not a valid job id: use 1-128 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit", Quote(j.ID))
	}
	if j.Domain != "" {
		validateDomainName("domain", j.Domain, &r)
	}
	switch j.Action {
	case "", ActionStart, ActionAttach, ActionDetach:
	default:
		r.Add("action", CodeInvalid, "%s is not an action; use \"start\", \"attach\" or \"detach\"", Quote(string(j.Action)))
	}
	if !KindTraits(j).Known {
		r.Add("format", CodeInvalid, "%s is not a format; use \"nocloud\", \"configdrive\", \"ignition\", \"sysprep\" or \"credentials\"", Quote(string(j.Format)))
	}
	switch j.Media {
	case "", MediaISO, MediaVFAT:
	default:
		r.Add("media", CodeInvalid, "%s is not a media type; use \"iso\" or \"vfat\"", Quote(string(j.Media)))
	}
	switch j.UserDataMode {
	case "", ModeMerge, ModeReplace:
	default:
		r.Add("user_data_mode", CodeInvalid, "%s is not a user-data mode; use \"merge\" or \"replace\"", Quote(string(j.UserDataMode)))
	}
	if j.DomainXML != "" {
		validateDomainXML(j, &r)
	}
	if j.PrebuiltImage != "" {
		validatePrebuilt(j, &r)
	}
	if id := j.InstanceID; id != "" && (len(id) > maxNameLen || strings.ContainsAny(id, "/\\") || hasControl(id) || strings.TrimSpace(id) != id) {
		r.Add("instance_id", CodeInvalid, "%s is not a usable instance id: at most %d printable characters, no slashes, no leading or trailing spaces", Quote(id), maxNameLen)
	}
	if j.Hostname != "" {
		validateHostname("hostname", j.Hostname, &r)
	}
	if j.Timezone != "" {
		validateTimezone("timezone", j.Timezone, &r)
	}
	validateUsers(j.Users, j.SSHAuthorizedKeys, &r)
	validateSeeds(j, &r)
	validateKeys("ssh_authorized_keys", j.SSHAuthorizedKeys, &r)
	if j.DNS != nil {
		validateDNS(j, &r)
	}
	validateNICs(j.NICs, &r)
	validateFiles(j.Files, &r)
	for i, c := range j.Runcmd {
		validateCommand(Index("runcmd", i), c, &r)
	}
	validateUserData(j, &r)
	if j.MetaData != nil {
		for _, k := range slices.Sorted(maps.Keys(j.MetaData)) {
			if k == "" || hasControl(k) {
				r.Add(join("meta_data", k), CodeInvalid, "meta-data key %s is empty or has control characters", Quote(k))
			}
		}
		checkMetaDataSpellings(j.MetaData, &r)
	}
	if j.NetworkConfig != "" {
		validateNetworkConfig(j, &r)
	}
	validateVendorData(j, &r)
	hooks().Check(j, "ignition", &r)
	hooks().Check(j, "windows", &r)
	hooks().Check(j, "sysprep", &r)
	hooks().Check(j, "credentials", &r)
	validateCombinations(j, &r)
	return r
}

// SetField is a field's name and whether a job sets it.
type SetField struct {
	Name string
	Set  bool
}

// SetNames returns the names of the fields that are set, in order.
func SetNames(fields []SetField) []string {
	var names []string
	for _, f := range fields {
		if f.Set {
			names = append(names, f.Name)
		}
	}
	return names
}

func hasControl(s string) bool { return strings.ContainsFunc(s, unicode.IsControl) }

func validateDomainName(p, name string, r *Report) {
	if domxml.IsUUID(name) {
		return
	}
	if len(name) > 255 || strings.Contains(name, "/") || hasControl(name) || strings.TrimSpace(name) != name {
		r.Add(p, CodeInvalid, "%s is not a libvirt domain name or UUID: at most 255 printable characters, no '/', no leading or trailing spaces", Quote(name))
	}
}

func validateDomainXML(j *Job, r *Report) {
	root, err := domxml.ReadIdentity(j.DomainXML)
	if err != nil {
		r.Add("domain_xml", CodeInvalid, "%s is not a libvirt <domain> XML document: %v", Quote(j.DomainXML), err)
		return
	}
	if root.Name == "" {
		r.Add("domain_xml", CodeRequired, "the <domain> XML has no <name>")
		return
	}
	if j.Domain != "" && j.Domain != root.Name && !domxml.SameUUID(j.Domain, root.UUID) {
		r.Add("domain_xml", CodeConflict, "the <domain> XML defines %s but the job's domain is %s", Quote(root.Name), Quote(j.Domain))
	}
}

func validatePrebuilt(j *Job, r *Report) {
	p := j.PrebuiltImage
	if !path.IsAbs(p) || path.Clean(p) != p || hasControl(p) {
		r.Add("prebuilt_image", CodeInvalid, "%s must be an absolute, clean path", Quote(p))
	}
	content := SetNames([]SetField{
		{"instance_id", j.InstanceID != ""}, {"hostname", j.Hostname != ""}, {"timezone", j.Timezone != ""},
		{"users", len(j.Users) > 0}, {"ssh_authorized_keys", len(j.SSHAuthorizedKeys) > 0},
		{"dns", j.DNS != nil}, {"nics", len(j.NICs) > 0}, {"files", len(j.Files) > 0}, {"runcmd", len(j.Runcmd) > 0},
		{"user_data", j.UserData != ""}, {"user_data_base64", j.UserDataBase64 != ""}, {"user_data_secret", j.UserDataSecret != ""},
		{"meta_data", j.MetaData != nil}, {"network_config", j.NetworkConfig != ""}, {"vendor_data", j.VendorData != ""}, {"vendor_data_base64", j.VendorDataBase64 != ""},
		{"regenerate_ssh_host_keys", j.RegenerateSSHHostKeys != nil}, {"ssh_password_auth", j.SSHPasswordAuth != nil},
		{"locale", j.Locale != ""}, {"ssh_host_keys", len(j.SSHHostKeys) > 0}, {"power_state", j.PowerState != nil},
		{"phone_home", j.PhoneHome != nil}, {"random_seed", j.RandomSeed != nil}, {"network_data", j.NetworkData != nil},
		{"ignition", j.Ignition != nil}, {"ignition_base64", j.IgnitionBase64 != ""}, {"butane", j.Butane != ""},
		{"admin_username", j.AdminUsername != ""}, {"admin_password_secret", j.AdminPasswordSecret != ""}, {"admin_certs", len(j.AdminCerts) > 0},
		{"sysprep", j.Sysprep != ""}, {"sysprep_base64", j.SysprepBase64 != ""}, {"sysprep_secret", j.SysprepSecret != ""},
	})
	if len(content) > 0 {
		r.Add("prebuilt_image", CodeConflict, "a prebuilt image is attached as it is, so it cannot be combined with content fields (%s)", strings.Join(content, ", "))
	}
}

// ValidHostname reports whether s is an RFC 1123 host name or FQDN.
func ValidHostname(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if len(l) > 63 || !labelRE().MatchString(l) {
			return false
		}
	}
	// an all-numeric last label would be read as an IP address
	last := s[strings.LastIndex(s, ".")+1:]
	_, err := strconv.Atoi(last)
	return err != nil
}

func validateHostname(p, s string, r *Report) {
	if !ValidHostname(s) {
		r.Add(p, CodeInvalid, "%s is not a valid host name: labels of 1-63 letters, digits and hyphens (not at either end), separated by dots, at most 253 characters", Quote(s))
	}
}

func validateTimezone(p, tz string, r *Report) {
	if tz == "Local" || strings.HasPrefix(tz, "/") || strings.Contains(tz, "..") || hasControl(tz) {
		r.Add(p, CodeInvalid, "%s is not an IANA time zone name such as \"Europe/Berlin\" or \"UTC\"", Quote(tz))
		return
	}
	if _, err := time.LoadLocation(tz); err != nil {
		r.Add(p, CodeNotFound, "time zone %s is not in the zoneinfo database", Quote(tz))
	}
}

// ValidSecretName reports whether name may name a file in the secrets
// directory: a single path element, no dot files, no "..".
func ValidSecretName(name string) bool {
	return len(name) <= 128 && secretRE().MatchString(name) && !strings.Contains(name, "..")
}

// CheckSecretName reports a name at p that cannot name a secret.
func CheckSecretName(p, name string, r *Report) {
	if !ValidSecretName(name) {
		r.Add(p, CodeInvalid, "%s is not a secret name: a single file name inside the secrets directory (letters, digits, . _ -, no \"/\", no \"..\", not starting with a dot)", Quote(name))
	}
}

func validateUsers(users []User, topKeys []string, r *Report) {
	seen := map[string]int{}
	for i, u := range users {
		p := Index("users", i)
		switch {
		case u.Name == "":
			r.Add(join(p, "name"), CodeRequired, "a user needs a name")
		case !userRE().MatchString(u.Name):
			r.Add(join(p, "name"), CodeInvalid, "%s is not a valid user name: lowercase letters, digits, _ and -, starting with a letter or _, at most 32 characters", Quote(u.Name))
		default:
			if prev, dup := seen[u.Name]; dup {
				r.Add(join(p, "name"), CodeDuplicate, "user %s is already defined at users[%d]", Quote(u.Name), prev)
			}
			seen[u.Name] = i
		}
		if u.Name == "root" {
			validateRootUser(p, u, topKeys, r)
		}
		var set []string
		if u.Password != "" {
			set = append(set, "password")
			if strings.ContainsAny(u.Password, "\x00\n") {
				r.Add(join(p, "password"), CodeInvalid, "the password contains a NUL byte or a newline")
			}
		}
		if u.PasswordHash != "" {
			set = append(set, "password_hash")
			if !cryptRE().MatchString(u.PasswordHash) {
				r.Add(join(p, "password_hash"), CodeInvalid, "the value (not shown) does not look like a crypt(3) hash such as \"$6$salt$hash\" (SHA-512); to give a plaintext password use \"password\"")
			}
		}
		if u.PasswordSecret != "" {
			set = append(set, "password_secret")
			CheckSecretName(join(p, "password_secret"), u.PasswordSecret, r)
		}
		if len(set) > 1 {
			r.Add(p, CodeConflict, "use only one of password, password_hash and password_secret (got %s)", strings.Join(set, ", "))
		}
		validateKeys(join(p, "ssh_authorized_keys"), u.SSHAuthorizedKeys, r)
		if u.Sudo != "" && (strings.ContainsAny(u.Sudo, "\n\r\x00") || strings.TrimSpace(u.Sudo) == "") {
			r.Add(join(p, "sudo"), CodeInvalid, "%s is not a single sudoers rule such as \"ALL=(ALL) NOPASSWD:ALL\"", Quote(u.Sudo))
		}
		gseen := map[string]bool{}
		for k, g := range u.Groups {
			gp := Index(join(p, "groups"), k)
			if !userRE().MatchString(g) {
				r.Add(gp, CodeInvalid, "%s is not a valid group name", Quote(g))
			} else if gseen[g] {
				r.Add(gp, CodeDuplicate, "group %s is listed twice", Quote(g))
			}
			gseen[g] = true
		}
		if u.Shell != "" && (!path.IsAbs(u.Shell) || path.Clean(u.Shell) != u.Shell || hasControl(u.Shell)) {
			r.Add(join(p, "shell"), CodeInvalid, "%s must be an absolute path such as \"/bin/bash\"", Quote(u.Shell))
		}
	}
}

func validateKeys(p string, keys []string, r *Report) {
	for i, k := range keys {
		kp := Index(p, i)
		if strings.ContainsAny(k, "\n\r") {
			r.Add(kp, CodeInvalid, "%s holds more than one line; give one key per array element", Quote(k))
			continue
		}
		if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k)); err != nil {
			r.Add(kp, CodeInvalid, "%s is not an authorized_keys line (\"ssh-ed25519 AAAA... comment\"): %v", Quote(k), err)
		}
	}
}

func validateDNS(j *Job, r *Report) {
	d := j.DNS
	for i, ns := range d.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			r.Add(Index("dns.nameservers", i), CodeInvalid, "%s is not an IPv4 or IPv6 address", Quote(ns))
		}
	}
	for i, s := range d.Search {
		if !ValidHostname(s) {
			r.Add(Index("dns.search", i), CodeInvalid, "%s is not a valid search domain", Quote(s))
		}
	}
	if len(j.NICs) == 0 && j.NetworkConfig == "" && j.NetworkData == nil && !KindTraits(j).GlobalDNS {
		r.Add("dns", CodeRequired, "dns is applied to the job's NICs, so at least one entry in nics is needed")
	}
	if j.NetworkConfig != "" {
		r.Add("dns", CodeConflict, "network_config replaces nics and dns; put nameservers in network_config instead")
	}
}

func validateNICs(nics []NIC, r *Report) {
	names := map[string]int{}
	macs := map[string]int{}
	for i, n := range nics {
		p := Index("nics", i)
		if n.Name != "" {
			if !ifnameRE().MatchString(n.Name) {
				r.Add(join(p, "name"), CodeInvalid, "%s is not a valid interface name: 1-15 characters from A-Z a-z 0-9 _ . -", Quote(n.Name))
			} else if prev, dup := names[n.Name]; dup {
				r.Add(join(p, "name"), CodeDuplicate, "interface name %s is already used by nics[%d]", Quote(n.Name), prev)
			} else {
				names[n.Name] = i
			}
		}
		switch {
		case n.MAC == "":
			r.Add(join(p, "mac"), CodeRequired, "a NIC needs a MAC address; the guest's interface is matched by it")
		case !macRE().MatchString(n.MAC):
			r.Add(join(p, "mac"), CodeInvalid, "%s is not a MAC address such as \"52:54:00:12:34:56\"", Quote(n.MAC))
		default:
			hw, _ := net.ParseMAC(n.MAC)
			key := strings.ToLower(n.MAC)
			if hw[0]&1 == 1 {
				r.Add(join(p, "mac"), CodeInvalid, "%s is a multicast address; a NIC needs a unicast MAC", Quote(n.MAC))
			} else if prev, dup := macs[key]; dup {
				r.Add(join(p, "mac"), CodeDuplicate, "MAC %s is already used by nics[%d]", Quote(n.MAC), prev)
			} else {
				macs[key] = i
			}
		}
		if n.MTU != 0 {
			min := 68
			if n.IPv6 != nil && n.IPv6.Method != "" && n.IPv6.Method != MethodNone {
				min = 1280
			}
			if n.MTU < min || n.MTU > 65535 {
				r.Add(join(p, "mtu"), CodeOutOfRange, "MTU %d is out of range; use %d-65535", n.MTU, min)
			}
		}
		if n.IPv4 != nil {
			validateIP(join(p, "ipv4"), n.IPv4, false, r)
		}
		if n.IPv6 != nil {
			validateIP(join(p, "ipv6"), n.IPv6, true, r)
		}
	}
}

func validateIP(p string, c *IPConfig, v6 bool, r *Report) {
	family := "IPv4"
	methods := `"static", "dhcp" or "none"`
	if v6 {
		family = "IPv6"
		methods = `"static", "dhcp", "slaac" or "none"`
	}
	switch c.Method {
	case MethodStatic:
	case MethodDHCP, MethodNone:
		if c.Address != "" || c.Gateway != "" {
			r.Add(p, CodeConflict, "address and gateway only go with method \"static\" (method is %s)", Quote(c.Method))
		}
		return
	case MethodSLAAC:
		if !v6 {
			r.Add(join(p, "method"), CodeInvalid, "%s is not an IPv4 method; use %s", Quote(c.Method), methods)
		} else if c.Address != "" || c.Gateway != "" {
			r.Add(p, CodeConflict, "address and gateway only go with method \"static\" (method is %s)", Quote(c.Method))
		}
		return
	case "":
		r.Add(join(p, "method"), CodeRequired, "method is required; use %s", methods)
		return
	default:
		r.Add(join(p, "method"), CodeInvalid, "%s is not a method; use %s", Quote(c.Method), methods)
		return
	}
	if c.Address == "" {
		r.Add(join(p, "address"), CodeRequired, "a static %s configuration needs an address in CIDR form", family)
		return
	}
	pfx, err := netip.ParsePrefix(c.Address)
	if err != nil || pfx.Addr().Zone() != "" {
		r.Add(join(p, "address"), CodeInvalid, "%s is not an %s address in CIDR form such as %s", Quote(c.Address), family, map[bool]string{false: `"192.0.2.10/24"`, true: `"2001:db8::10/64"`}[v6])
		return
	}
	if pfx.Addr().Is6() != v6 || pfx.Addr().Is4In6() {
		r.Add(join(p, "address"), CodeInvalid, "%s is not an %s address", Quote(c.Address), family)
		return
	}
	// /31 (RFC 3021) and /32 have no network or broadcast address
	if !v6 && pfx.Bits() < 31 && (pfx.Addr() == pfx.Masked().Addr() || pfx.Addr() == lastAddr(pfx)) {
		r.Add(join(p, "address"), CodeInvalid, "%s is the network or broadcast address of its subnet", Quote(c.Address))
	}
	if c.Gateway != "" {
		gw, err := netip.ParseAddr(c.Gateway)
		switch {
		case err != nil || gw.Zone() != "":
			r.Add(join(p, "gateway"), CodeInvalid, "%s is not an %s address", Quote(c.Gateway), family)
		case gw.Is6() != v6 || gw.Is4In6():
			r.Add(join(p, "gateway"), CodeInvalid, "%s is not an %s address; the gateway must be in the same family as the address", Quote(c.Gateway), family)
		case v6 && gw.IsLinkLocalUnicast():
			// a link-local IPv6 router is reachable from any prefix
		case !pfx.Masked().Contains(gw):
			r.Add(join(p, "gateway"), CodeInvalid, "gateway %s is not inside the subnet %s", Quote(c.Gateway), pfx.Masked())
		case gw == pfx.Addr():
			r.Add(join(p, "gateway"), CodeInvalid, "gateway %s is the NIC's own address", Quote(c.Gateway))
		case !v6 && pfx.Bits() < 31 && (gw == pfx.Masked().Addr() || gw == lastAddr(pfx)):
			r.Add(join(p, "gateway"), CodeInvalid, "gateway %s is the network or broadcast address of the subnet %s", Quote(c.Gateway), pfx.Masked())
		}
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := 32 - p.Bits()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= (1 << host) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func validateFiles(files []File, r *Report) {
	seen := map[string]int{}
	total := 0
	for i, f := range files {
		p := Index("files", i)
		switch {
		case f.Path == "":
			r.Add(join(p, "path"), CodeRequired, "a file needs an absolute path")
		case !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" || strings.Contains(f.Path, "/../") || hasControl(f.Path):
			r.Add(join(p, "path"), CodeInvalid, "%s must be an absolute, clean path to a file (no \"..\", no \"//\", no trailing \"/\")", Quote(f.Path))
		default:
			if prev, dup := seen[f.Path]; dup {
				r.Add(join(p, "path"), CodeDuplicate, "path %s is already written by files[%d]", Quote(f.Path), prev)
			}
			seen[f.Path] = i
		}
		switch f.Encoding {
		case "", EncodingText:
			total += len(f.Content)
		case EncodingBase64:
			b, err := base64.StdEncoding.DecodeString(f.Content)
			if err != nil {
				r.Add(join(p, "content"), CodeInvalid, "content %s is not valid base64: %v", Quote(f.Content), err)
			}
			total += len(b)
		default:
			r.Add(join(p, "encoding"), CodeInvalid, "%s is not an encoding; use \"text\" or \"base64\"", Quote(f.Encoding))
		}
		if f.Permissions != "" && !permRE().MatchString(f.Permissions) {
			r.Add(join(p, "permissions"), CodeInvalid, "%s is not an octal mode such as \"0644\"", Quote(f.Permissions))
		}
		if f.Owner != "" {
			u, g, ok := strings.Cut(f.Owner, ":")
			if !ok || !userRE().MatchString(u) || !userRE().MatchString(g) {
				r.Add(join(p, "owner"), CodeInvalid, "%s is not \"user:group\"", Quote(f.Owner))
			}
		}
	}
	if total > MaxContentBytes {
		r.Add("files", CodeTooLarge, "file contents add up to %d bytes; the image limit is %d", total, MaxContentBytes)
	}
}

func validateUserData(j *Job, r *Report) {
	if KindTraits(j).AnswerFile {
		return // the answer file is the whole payload: its kind refuses each user-data field, once
	}
	check := func(p, s string) {
		if j.IsWindows() {
			validateWindowsUserData(j, p, s, Quote, error.Error, r)
		} else {
			checkMergeableNode(j, validateUserDataText(p, s, r), r)
			CheckReporterUserData(j, s, r)
		}
	}
	var set []string
	if j.UserData != "" {
		set = append(set, "user_data")
		check("user_data", j.UserData)
	}
	if j.UserDataBase64 != "" {
		set = append(set, "user_data_base64")
		b, err := base64.StdEncoding.DecodeString(j.UserDataBase64)
		if err != nil {
			r.Add("user_data_base64", CodeInvalid, "%s is not valid base64: %v", Quote(j.UserDataBase64), err)
		} else {
			check("user_data_base64", string(b))
		}
	}
	if j.UserDataSecret != "" {
		set = append(set, "user_data_secret")
		CheckSecretName("user_data_secret", j.UserDataSecret, r)
	}
	if len(set) > 1 {
		r.Add("user_data", CodeConflict, "use only one of user_data, user_data_base64 and user_data_secret (got %s)", strings.Join(set, ", "))
	}
	if j.UserDataMode == ModeReplace && len(set) == 0 {
		r.Add("user_data_mode", CodeConflict, "user_data_mode %s needs user_data, user_data_base64 or user_data_secret", Quote(string(j.UserDataMode)))
	}
}

// validateUserDataText checks user-data or vendor-data s for field p and
// returns the top mapping of a #cloud-config (nil for other types).
func validateUserDataText(p, s string, r *Report) *yaml.Node {
	return checkUserDataContent(p, s, Quote, error.Error, r)
}

// ValidateSecretUserData checks user-data read from a secret the way
// user_data is checked, reporting problems under field without ever quoting
// the content: the message shows only the content's size, and parser
// errors are cut down to their line number.
func ValidateSecretUserData(field, name, s string) Report {
	var r Report
	show := func(string) string { return fmt.Sprintf("(content of secret %q, %d bytes)", name, len(s)) }
	_ = checkUserDataContent(field, s, show, redactParseError, &r)
	return r
}

var lineRE = LazyRegexp(`line \d+`)

// redactParseError keeps only the position of a parse error (its message
// may quote the secret's text).
func redactParseError(err error) string {
	if m := lineRE().FindString(err.Error()); m != "" {
		return "syntax error at " + m
	}
	return "syntax error"
}

func validateVendorData(j *Job, r *Report) {
	if j.VendorData != "" {
		validateUserDataText("vendor_data", j.VendorData, r)
	}
	if j.VendorDataBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(j.VendorDataBase64)
		if err != nil {
			r.Add("vendor_data_base64", CodeInvalid, "%s is not valid base64: %v", Quote(j.VendorDataBase64), err)
		} else {
			validateUserDataText("vendor_data_base64", string(b), r)
		}
		if j.VendorData != "" {
			r.Add("vendor_data", CodeConflict, "use only one of vendor_data and vendor_data_base64")
		}
	}
}

// UserDataText returns the text cloud-init reads from raw user-data or
// vendor-data: gzip data decompressed (at most MaxContentBytes), anything
// else as it is.
func UserDataText(raw string) (string, error) {
	b, _, err := Gunzip([]byte(raw), MaxContentBytes)
	return string(b), err
}

// gzipNote says, in a size message, that the size is the decompressed one.
func gzipNote(gz bool) string {
	if gz {
		return " after gzip decompression"
	}
	return ""
}

func checkUserDataContent(p, s string, show func(string) string, detail func(error) string, r *Report) (cloudConfig *yaml.Node) {
	gz := IsGzip([]byte(s))
	if gz {
		t, err := UserDataText(s)
		if err != nil {
			code := CodeInvalid
			if errors.Is(err, ErrDecompressedTooLarge) {
				code = CodeTooLarge
			}
			r.Add(p, code, "gzip-compressed content (%d bytes) cannot be used: %v", len(s), err)
			return nil
		}
		s = t
	}
	if strings.ContainsRune(s, 0) {
		r.Add(p, CodeInvalid, "%s contains a NUL byte; cloud-init reads such binary content as no known type and ignores it", show(s))
		return nil
	}
	switch ClassifyUserData(s) {
	case KindCloudConfig:
		if d, _, err := LoadYAMLMapping(s); errors.Is(err, ErrYAMLLimit) {
			r.Add(p, CodeTooLarge, "#cloud-config %s (%d bytes%s) is refused: %v", show(s), len(s), gzipNote(gz), err)
		} else if err != nil {
			r.Add(p, CodeInvalid, "#cloud-config %s is not a valid YAML mapping (cloud-init would ignore it): %s", show(s), detail(err))
		} else if err := checkAliasing(d); err != nil {
			r.Add(p, CodeInvalid, "#cloud-config %s expands beyond reason (cloud-init's loader would expand every alias): %s", show(s), detail(err))
		} else {
			cloudConfig = d
		}
	case KindArchive:
		if err := checkYAML(s); errors.Is(err, ErrYAMLLimit) {
			r.Add(p, CodeTooLarge, "#cloud-config-archive %s (%d bytes%s) is refused: %v", show(s), len(s), gzipNote(gz), err)
		} else if err != nil {
			r.Add(p, CodeInvalid, "#cloud-config-archive %s is not valid YAML: %s", show(s), detail(err))
		}
	case KindMultipart:
		if _, err := SplitMIME(s); err != nil {
			r.Add(p, CodeInvalid, "MIME user-data %s cannot be read: %s", show(s), detail(err))
		}
	case KindUnknown:
		r.Add(p, CodeInvalid, "cloud-init would ignore %s: it does not start with \"#cloud-config\", \"#!...\", \"#include\", \"#cloud-boothook\", \"#part-handler\", \"## template: jinja\" or \"#cloud-config-archive\", and has no \"MIME-Version:\" header in its first 4096 bytes", show(s))
	}
	return cloudConfig
}

// checkAliasing refuses a document whose aliases expand excessively (an
// alias bomb) or refer to themselves (a structure without end); other
// decoding problems are left to cloud-init, whose
// YAML 1.1 loader reads some values yaml.v3 refuses.
func checkAliasing(d *yaml.Node) error {
	if d == nil {
		return nil
	}
	var v any
	if err := d.Decode(&v); err != nil && (strings.Contains(err.Error(), "aliasing") || strings.Contains(err.Error(), "contains itself")) {
		return err
	}
	return nil
}

func checkYAML(s string) error {
	if err := checkYAMLSize(s); err != nil {
		return err
	}
	var v yaml.Node
	err := yaml.NewDecoder(strings.NewReader(s)).Decode(&v)
	if err == nil {
		_, err = countYAMLNodes(&v)
	} else if err.Error() == "EOF" {
		return nil
	}
	return err
}

func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	}
	return "node"
}

func validateNetworkConfig(j *Job, r *Report) {
	if len(j.NICs) > 0 {
		r.Add("network_config", CodeConflict, "network_config replaces nics; give one or the other")
	}
	d, _, err := LoadYAMLMapping(j.NetworkConfig)
	if errors.Is(err, ErrYAMLLimit) {
		r.Add("network_config", CodeTooLarge, "%s is refused: %v", Quote(j.NetworkConfig), err)
		return
	}
	if err != nil {
		r.Add("network_config", CodeInvalid, "%s is not a valid YAML mapping: %v", Quote(j.NetworkConfig), err)
		return
	}
	if err := checkAliasing(d); err != nil {
		r.Add("network_config", CodeInvalid, "%s expands beyond reason: %v", Quote(j.NetworkConfig), err)
		return
	}
	d, wrapped, err := networkConfigBody(d)
	if err != nil {
		r.Add("network_config", CodeInvalid, "%s: %v", Quote(j.NetworkConfig), err)
		return
	}
	p := "network_config.version"
	if wrapped {
		p = "network_config.network.version"
	}
	v := mappingValue(d, "version")
	if v == nil {
		r.Add(p, CodeRequired, "network-config must have \"version: 1\" or \"version: 2\" at the top level (or under a top-level \"network:\")")
		return
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || (strings.TrimLeft(v.Value, "+0") != "1" && strings.TrimLeft(v.Value, "+0") != "2") {
		r.Add(p, CodeUnsupported, "network-config version %s is not supported; use 1 or 2", Quote(v.Value))
	}
}
