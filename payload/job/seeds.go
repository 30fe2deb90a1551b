package job

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
)

// This file validates the fields that cover what oVirt's and Nova's seeds
// set beyond users and network: root, given SSH host keys, locale, power
// state, phone home, random seed and a raw network_data.json.

var localeRE = LazyRegexp(`^(C|POSIX|C\.[A-Za-z0-9-]+|[a-z]{2,3}(_[A-Z]{2}|_[0-9]{3})?(\.[A-Za-z0-9][A-Za-z0-9-]*)?(@[a-z0-9]+)?)$`)

// ValidLocale reports whether s is a locale name in the form glibc and
// update-locale use: "C", "POSIX", "C.UTF-8", "en_US.UTF-8", "de_DE@euro",
// "sr_RS.UTF-8@latin".
func ValidLocale(s string) bool { return len(s) <= 64 && localeRE().MatchString(s) }

// HostKeyAlgorithms maps an ssh_host_keys type to the SSH public key
// algorithms of that type.
var HostKeyAlgorithms = map[string][]string{
	HostKeyEd25519: {ssh.KeyAlgoED25519},
	HostKeyECDSA:   {ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521},
	HostKeyRSA:     {ssh.KeyAlgoRSA},
}

// validateRootUser reports the users[] fields that do not apply to the
// existing root account: cloud-init skips useradd for an account that
// exists, so they would be dropped silently.
func validateRootUser(p string, u User, top []string, r *Report) {
	if len(u.Groups) > 0 {
		r.Add(join(p, "groups"), CodeInvalid, "groups %s cannot be set for root: cloud-init does not change an existing account's groups", Quote(strings.Join(u.Groups, ",")))
	}
	if u.Shell != "" {
		r.Add(join(p, "shell"), CodeInvalid, "shell %s cannot be set for root: cloud-init does not change an existing account's shell", Quote(u.Shell))
	}
	if u.Sudo != "" {
		r.Add(join(p, "sudo"), CodeInvalid, "sudo %s does not apply to root", Quote(u.Sudo))
	}
	// cloud-init gives the job-wide keys to root too, with a forced
	// command refusing the log-in (disable_root); the same key given for
	// root would be rewritten with that prefix.
	blobs := map[string]bool{}
	for _, k := range top {
		if pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k)); err == nil {
			blobs[string(pk.Marshal())] = true
		}
	}
	for i, k := range u.SSHAuthorizedKeys {
		if pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k)); err == nil && blobs[string(pk.Marshal())] {
			r.Add(Index(join(p, "ssh_authorized_keys"), i), CodeConflict, "key %s is also in the top-level ssh_authorized_keys, which cloud-init installs for root with a command refusing the log-in; give it in one place only", Quote(k))
		}
	}
}

func validateSSHHostKeys(j *Job, r *Report) {
	seen := map[string]int{}
	for i, k := range j.SSHHostKeys {
		p := Index("ssh_host_keys", i)
		algos, known := HostKeyAlgorithms[k.Type]
		switch {
		case k.Type == "":
			r.Add(join(p, "type"), CodeRequired, "type is required; use \"ed25519\", \"ecdsa\" or \"rsa\"")
		case !known:
			r.Add(join(p, "type"), CodeInvalid, "%s is not a host key type; use \"ed25519\", \"ecdsa\" or \"rsa\"", Quote(k.Type))
		default:
			if prev, dup := seen[k.Type]; dup {
				r.Add(join(p, "type"), CodeDuplicate, "a %s host key is already given at ssh_host_keys[%d]", Quote(k.Type), prev)
			}
			seen[k.Type] = i
		}
		if k.PrivateKeySecret == "" {
			r.Add(join(p, "private_key_secret"), CodeRequired, "private_key_secret is required: the name of the secret holding the private key (private keys are never given inline)")
		} else {
			CheckSecretName(join(p, "private_key_secret"), k.PrivateKeySecret, r)
		}
		if k.PublicKey != "" {
			pp := join(p, "public_key")
			if strings.ContainsAny(k.PublicKey, "\r\n") {
				r.Add(pp, CodeInvalid, "%s holds more than one line; give one public key", Quote(k.PublicKey))
				continue
			}
			pk, _, opts, _, err := ssh.ParseAuthorizedKey([]byte(k.PublicKey))
			switch {
			case err != nil:
				r.Add(pp, CodeInvalid, "%s is not an SSH public key (\"ssh-ed25519 AAAA... comment\"): %v", Quote(k.PublicKey), err)
			case len(opts) > 0:
				r.Add(pp, CodeInvalid, "%s carries authorized_keys options; give the plain public key", Quote(k.PublicKey))
			case known && !slices.Contains(algos, pk.Type()):
				r.Add(pp, CodeInvalid, "%s is a %s key, not of type %s", Quote(k.PublicKey), pk.Type(), Quote(k.Type))
			}
		}
	}
	if len(j.SSHHostKeys) > 0 && j.RegenerateSSHHostKeys != nil && !*j.RegenerateSSHHostKeys {
		r.Add("ssh_host_keys", CodeConflict, "given host keys replace the image's keys, so regenerate_ssh_host_keys cannot be false (the image's other keys would stay)")
	}
}

func validatePowerState(ps *PowerState, r *Report) {
	const p = "power_state"
	switch ps.Mode {
	case PowerOff, Reboot:
	case "":
		r.Add(join(p, "mode"), CodeRequired, "mode is required; use \"poweroff\" or \"reboot\"")
	default:
		r.Add(join(p, "mode"), CodeInvalid, "%s is not a power state mode; use \"poweroff\" or \"reboot\"", Quote(ps.Mode))
	}
	if ps.DelayMinutes < 0 || ps.DelayMinutes > 1440 {
		r.Add(join(p, "delay_minutes"), CodeOutOfRange, "delay %d is out of range; use 0-1440 minutes (0: as soon as cloud-init has finished)", ps.DelayMinutes)
	}
	if ps.TimeoutSeconds < 0 || ps.TimeoutSeconds > 86400 {
		r.Add(join(p, "timeout_seconds"), CodeOutOfRange, "timeout %d is out of range; use 1-86400 seconds (0: cloud-init's default, 30)", ps.TimeoutSeconds)
	}
	if len(ps.Message) > 256 || hasControl(ps.Message) {
		r.Add(join(p, "message"), CodeInvalid, "%s is not a one-line message of at most 256 bytes", Quote(ps.Message))
	}
	if c := ps.Condition; c != nil {
		validateCommand(join(p, "condition"), *c, r)
	}
}

func validateCommand(p string, c Command, r *Report) {
	switch {
	case c.Argv != nil && len(c.Argv) == 0:
		r.Add(p, CodeRequired, "an argv command needs at least one element")
	case c.Argv != nil:
		for k, a := range c.Argv {
			if strings.ContainsRune(a, 0) {
				r.Add(Index(p, k), CodeInvalid, "argument %s contains a NUL byte", Quote(a))
			}
		}
	case strings.TrimSpace(c.Shell) == "":
		r.Add(p, CodeRequired, "a shell command must not be empty")
	case strings.ContainsRune(c.Shell, 0):
		r.Add(p, CodeInvalid, "command %s contains a NUL byte", Quote(c.Shell))
	}
}

func validatePhoneHome(ph *PhoneHome, r *Report) {
	const p = "phone_home"
	if ph.URL == "" {
		r.Add(join(p, "url"), CodeRequired, "url is required: the http or https URL cloud-init posts to")
	} else {
		u, err := url.Parse(ph.URL)
		switch {
		case len(ph.URL) > 2048 || hasControl(ph.URL) || strings.ContainsAny(ph.URL, " \t"):
			r.Add(join(p, "url"), CodeInvalid, "%s is not a URL: at most 2048 characters, no spaces or control characters", Quote(ph.URL))
		case err != nil:
			r.Add(join(p, "url"), CodeInvalid, "%s is not a URL: %v", Quote(ph.URL), err)
		case u.Scheme != "http" && u.Scheme != "https":
			r.Add(join(p, "url"), CodeInvalid, "%s is not an http or https URL", Quote(ph.URL))
		case u.Host == "":
			r.Add(join(p, "url"), CodeInvalid, "%s has no host", Quote(ph.URL))
		}
	}
	if ph.Post != nil && len(ph.Post) == 0 {
		r.Add(join(p, "post"), CodeRequired, "post needs at least one key; leave it out to post all of them")
	}
	seen := map[string]int{}
	for i, k := range ph.Post {
		pp := Index(join(p, "post"), i)
		if !slices.Contains(PhoneHomeKeys, k) {
			r.Add(pp, CodeInvalid, "%s is not a phone_home key; use %s", Quote(k), strings.Join(PhoneHomeKeys, ", "))
		} else if prev, dup := seen[k]; dup {
			r.Add(pp, CodeDuplicate, "%s is already listed at post[%d]", Quote(k), prev)
		}
		seen[k] = i
	}
	if ph.Tries < 0 || ph.Tries > 100 {
		r.Add(join(p, "tries"), CodeOutOfRange, "tries %d is out of range; use 1-100 (0: cloud-init's default, 10)", ph.Tries)
	}
}

func validateRandomSeed(rs *RandomSeed, r *Report) {
	const p = "random_seed"
	switch {
	case rs.Data != "" && rs.GenerateBytes != 0:
		r.Add(p, CodeConflict, "use only one of data and generate_bytes")
	case rs.Data == "" && rs.GenerateBytes == 0:
		r.Add(p, CodeRequired, "give data (base64) or generate_bytes (%d-%d)", MinRandomSeedBytes, MaxRandomSeedBytes)
	}
	if rs.Data != "" {
		b, err := base64.StdEncoding.DecodeString(rs.Data)
		switch {
		case err != nil:
			r.Add(join(p, "data"), CodeInvalid, "%s is not valid base64 (standard alphabet, padded): %v", Quote(rs.Data), err)
		case len(b) < MinRandomSeedBytes || len(b) > MaxRandomSeedBytes:
			r.Add(join(p, "data"), CodeOutOfRange, "%s decodes to %d bytes; use %d-%d", Quote(rs.Data), len(b), MinRandomSeedBytes, MaxRandomSeedBytes)
		case base64.StdEncoding.EncodeToString(b) != rs.Data:
			r.Add(join(p, "data"), CodeInvalid, "%s is not canonical base64 (no line breaks, padding as encoded)", Quote(rs.Data))
		}
	}
	if rs.GenerateBytes != 0 && (rs.GenerateBytes < MinRandomSeedBytes || rs.GenerateBytes > MaxRandomSeedBytes) {
		r.Add(join(p, "generate_bytes"), CodeOutOfRange, "%d bytes is out of range; use %d-%d", rs.GenerateBytes, MinRandomSeedBytes, MaxRandomSeedBytes)
	}
}

// NetworkDataTypes are the network types of network_data.json.
var NetworkDataTypes = []string{"ipv4", "ipv6", "ipv4_dhcp", "ipv6_dhcp", "ipv6_slaac", "ipv6_dhcpv6-stateless", "ipv6_dhcpv6-stateful"}

func validateNetworkData(j *Job, r *Report) {
	const p = "network_data"
	// a job without format gets the agent's default format, which may be
	// configdrive; the renderer refuses network_data with nocloud then
	if KindTraits(j).NoCloud {
		r.Add(p, CodeConflict, "network_data is the config-drive document (format \"configdrive\"); with format %s use network_config or nics", Quote(string(j.Format)))
	}
	if len(j.NICs) > 0 || j.DNS != nil || j.NetworkConfig != "" {
		r.Add(p, CodeConflict, "network_data replaces nics, dns and network_config; give one of them")
	}
	for _, k := range slices.Sorted(maps.Keys(j.NetworkData)) {
		if k != "links" && k != "networks" && k != "services" {
			r.Add(join(p, k), CodeUnknownField, "unknown key %s; network_data has links, networks and services", Quote(k))
		}
	}
	links := objects(p, "links", j.NetworkData, true, r)
	ids := map[string]int{}
	for i, l := range links {
		lp := Index(join(p, "links"), i)
		if l == nil {
			continue
		}
		id := str(lp, "id", l, true, r)
		if id != "" {
			if prev, dup := ids[id]; dup {
				r.Add(join(lp, "id"), CodeDuplicate, "link id %s is already used by links[%d]", Quote(id), prev)
			}
			ids[id] = i
		}
		str(lp, "type", l, true, r)
		mac := str(lp, "ethernet_mac_address", l, false, r)
		if mac != "" && !macRE().MatchString(mac) {
			r.Add(join(lp, "ethernet_mac_address"), CodeInvalid, "%s is not a MAC address such as \"52:54:00:12:34:56\"", Quote(mac))
		}
		name := str(lp, "name", l, false, r)
		if name != "" && !ifnameRE().MatchString(name) {
			r.Add(join(lp, "name"), CodeInvalid, "%s is not a valid interface name", Quote(name))
		}
		if mac == "" && name == "" {
			r.Add(lp, CodeRequired, "a link needs ethernet_mac_address or name; cloud-init cannot match it to a NIC otherwise")
		}
		if v, ok := l["mtu"]; ok && v != nil {
			if n, isInt := v.(int64); !isInt || n < 68 || n > 65535 {
				r.Add(join(lp, "mtu"), CodeOutOfRange, "MTU %v is not an integer in 68-65535", v)
			}
		}
	}
	for i, n := range objects(p, "networks", j.NetworkData, false, r) {
		np := Index(join(p, "networks"), i)
		if n == nil {
			continue
		}
		str(np, "id", n, true, r)
		typ := str(np, "type", n, true, r)
		if typ != "" && !slices.Contains(NetworkDataTypes, typ) {
			r.Add(join(np, "type"), CodeInvalid, "%s is not a network type; use %s", Quote(typ), strings.Join(NetworkDataTypes, ", "))
		}
		if link := str(np, "link", n, true, r); link != "" {
			if _, ok := ids[link]; !ok {
				r.Add(join(np, "link"), CodeNotFound, "no link has id %s", Quote(link))
			}
		}
		if typ == "ipv4" || typ == "ipv6" {
			addr := str(np, "ip_address", n, true, r)
			if a, err := netip.ParseAddr(addr); addr != "" && (err != nil || a.Is6() != (typ == "ipv6") || a.Zone() != "") {
				r.Add(join(np, "ip_address"), CodeInvalid, "%s is not an %s address", Quote(addr), typ)
			}
			if m := str(np, "netmask", n, false, r); m != "" && !strings.Contains(addr, "/") && !validNetmask(m, typ == "ipv6") {
				r.Add(join(np, "netmask"), CodeInvalid, "%s is not an %s netmask", Quote(m), typ)
			}
		}
		for k, rt := range objects(np, "routes", n, false, r) {
			rp := Index(join(np, "routes"), k)
			if rt == nil {
				continue
			}
			for _, f := range []string{"network", "netmask", "gateway"} {
				if v := str(rp, f, rt, true, r); v != "" {
					if _, err := netip.ParseAddr(v); err != nil {
						r.Add(join(rp, f), CodeInvalid, "%s is not an IP address", Quote(v))
					}
				}
			}
		}
		validateServices(np, n, r)
	}
	validateServices(p, j.NetworkData, r)
}

func validateServices(p string, m map[string]any, r *Report) {
	for i, s := range objects(p, "services", m, false, r) {
		sp := Index(join(p, "services"), i)
		if s == nil {
			continue
		}
		if typ := str(sp, "type", s, true, r); typ == "dns" {
			if a := str(sp, "address", s, true, r); a != "" {
				if _, err := netip.ParseAddr(a); err != nil {
					r.Add(join(sp, "address"), CodeInvalid, "%s is not an IP address", Quote(a))
				}
			}
		}
	}
}

func validBase64(s string) bool {
	_, err := base64.StdEncoding.DecodeString(s)
	return err == nil
}

func validNetmask(m string, v6 bool) bool {
	a, err := netip.ParseAddr(m)
	if err != nil || a.Is6() != v6 {
		return false
	}
	ones, bits := net.IPMask(a.AsSlice()).Size()
	return bits != 0 && ones >= 0
}

// objects returns the list of objects under key of m (nil elements for
// entries that are not objects, which are reported).
func objects(p, key string, m map[string]any, required bool, r *Report) []map[string]any {
	v, ok := m[key]
	if !ok || v == nil {
		if required {
			r.Add(join(p, key), CodeRequired, "%s is required", key)
		}
		return nil
	}
	list, ok := expect[[]any](v, join(p, key), "an array", r)
	if !ok {
		return nil
	}
	out := make([]map[string]any, len(list))
	for i, e := range list {
		out[i], _ = expect[map[string]any](e, Index(join(p, key), i), "an object", r)
	}
	return out
}

// str returns the string under key of m, reporting a missing (when
// required) or non-string value.
func str(p, key string, m map[string]any, required bool, r *Report) string {
	v, ok := m[key]
	if !ok || v == nil {
		if required {
			r.Add(join(p, key), CodeRequired, "%s is required", key)
		}
		return ""
	}
	s, ok := expect[string](v, join(p, key), "a string", r)
	if ok && required && s == "" {
		r.Add(join(p, key), CodeRequired, "%s must not be empty", key)
	}
	return s
}

// validateSeeds checks the fields of this file.
func validateSeeds(j *Job, r *Report) {
	if j.Locale != "" && !ValidLocale(j.Locale) {
		r.Add("locale", CodeInvalid, "%s is not a locale name such as \"en_US.UTF-8\", \"de_DE@euro\", \"C.UTF-8\" or \"POSIX\"", Quote(j.Locale))
	}
	validateSSHHostKeys(j, r)
	if j.PowerState != nil {
		validatePowerState(j.PowerState, r)
	}
	if j.PhoneHome != nil {
		validatePhoneHome(j.PhoneHome, r)
	}
	if j.RandomSeed != nil {
		validateRandomSeed(j.RandomSeed, r)
	}
	if v, ok := j.MetaData["random_seed"]; ok {
		if j.RandomSeed != nil {
			r.Add("meta_data.random_seed", CodeConflict, "random_seed is set by the job's random_seed field; leave it out of meta_data")
		} else if sv, isStr := v.(string); KindTraits(j).OpenStack && (!isStr || !validBase64(sv)) {
			// cloud-init's config-2 reader raises on a non-base64 seed
			// and ignores the whole drive
			r.Add("meta_data.random_seed", CodeInvalid, "%s is not a base64 string; config-2 readers refuse the drive then", Quote(fmt.Sprint(v)))
		}
	}
	if j.NetworkData != nil {
		validateNetworkData(j, r)
	}
}
