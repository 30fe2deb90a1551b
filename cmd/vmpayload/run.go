package main

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// "vmpayload run" builds a job document from flags, for operators who work
// with virsh and do not want to write JSON, and hands it to the agent the
// way "submit" does. The flag names are a public contract like the job
// format: flags may be added, never renamed. docs/run.md describes them.

func newRunCmd() *cobra.Command {
	var f runFlags
	var cmd *cobra.Command
	cmd = command("run DOMAIN [flags]", "build a job from flags and hand it to the agent (virsh-style Run Once)", 0, -1, completeDomains,
		func(args []string, stdout, stderr io.Writer) int { return runRun(cmd, &f, args, stdout, stderr) })
	cmd.Long = cmd.Short + "\n\n" + runHelp
	defineRunFlags(cmd, &f)
	return cmd
}

// runHelp is printed after the summary of "vmpayload run -h".
const runHelp = `Flags that read a file take "-" for standard input (one of them at most). Passwords are only read from files or standard input, never from the command line. Repeatable flags say so. Without --attach or --detach the payload is attached and the domain started. --print-job prints the job document instead of submitting it; the document holds the passwords read from files.`

// runStdin is what "-" reads (a variable for tests); nil is os.Stdin.
var runStdin io.Reader

// runFlags holds the parsed flags of "vmpayload run". The bools
// regenHostKeys, sshPasswordAuth, lockPassword and rootLock go into the job
// only when given (jobBuilder.optBool); left out, the image decides.
type runFlags struct {
	submitOptions
	id, instanceID, format, media, domainXML, prebuilt string
	attach, detach, printJob                           bool

	hostname, timezone, locale       string
	sshKeys, defaultSSHKeys          []string
	regenHostKeys, sshPasswordAuth   bool
	sshHostKeys                      []string
	user, passwordFile, passwordHash string
	passwordSecret, sudo, groups     string
	shell                            string
	lockPassword                     bool
	rootPasswordFile, rootHash       string
	rootSecret                       string
	rootSSHKeys                      []string
	rootLock                         bool

	nics, dns, dnsSearch []string
	files                []string
	runcmd, runcmdArgv   []string

	userData, userDataSecret, userDataMode string
	vendorData, networkConfig, networkData string
	metaDataFile                           string
	meta                                   []string

	powerState, powerMessage, powerCondition string
	powerDelay, powerTimeout                 int
	phoneHome, phoneHomePost                 string
	phoneHomeTries                           int
	randomSeedFile                           string
	randomSeedBytes                          int

	ign   ignitionFlags    // ignition.go
	creds credentialsFlags // credentials.go
}

// splitList returns the comma-separated elements of values, trimmed, without
// empty ones.
func splitList(values ...string) []string {
	var list []string
	for _, v := range values {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				list = append(list, e)
			}
		}
	}
	return list
}

// defineRunFlags defines the flags of run on cmd, into f.
func defineRunFlags(cmd *cobra.Command, f *runFlags) {
	fs := cmd.Flags()
	// job, payload and domain
	fs.StringVar(&f.id, "id", "", "the job's `ID` (default: the agent makes one)")
	fs.BoolVar(&f.attach, "attach", false, "attach (or change) the payload only; do not start the domain (action \"attach\")")
	fs.BoolVar(&f.detach, "detach", false, "remove the payload from the domain (action \"detach\"); content flags are refused")
	fs.StringVar(&f.format, "format", "", "payload layout `nocloud|configdrive|ignition` (default: the agent's default_format)")
	fs.StringVar(&f.media, "media", "", "payload image `iso|vfat` (default iso)")
	fs.StringVar(&f.domainXML, "domain-xml", "", "libvirt domain XML `FILE`, defined first if DOMAIN does not exist")
	fs.StringVar(&f.prebuilt, "prebuilt-image", "", "attach this config disk `PATH` as it is (no content flags)")
	fs.StringVar(&f.instanceID, "instance-id", "", "cloud-init instance `ID` (default: a hash of the content)")
	// system
	fs.StringVar(&f.hostname, "hostname", "", "host `NAME` or FQDN")
	fs.StringVar(&f.timezone, "timezone", "", "IANA time `ZONE`, e.g. Europe/Berlin")
	fs.StringVar(&f.locale, "locale", "", "system `LOCALE`, e.g. en_US.UTF-8")
	fs.StringArrayVar(&f.sshKeys, "ssh-key", nil, "authorized keys `FILE` (one key a line) for --user, or for the image's default user without --user (repeatable)")
	fs.StringArrayVar(&f.defaultSSHKeys, "default-ssh-key", nil, "authorized keys `FILE` for the image's default user when --user is given (repeatable)")
	fs.BoolVar(&f.regenHostKeys, "regenerate-ssh-host-keys", false, "true: regenerate the SSH host keys on first boot; false: keep the image's")
	fs.BoolVar(&f.sshPasswordAuth, "ssh-password-auth", false, "enable (true) or disable (false) SSH password log-in")
	fs.StringArrayVar(&f.sshHostKeys, "ssh-host-key", nil, "SSH host key `TYPE:SECRET[:PUBFILE]`: ed25519|ecdsa|rsa, the private key's secret name, optional public key file (repeatable)")
	// the user
	fs.StringVar(&f.user, "user", "", "create the user `NAME` (the flags below apply to it)")
	fs.StringVar(&f.passwordFile, "password-file", "", "--user's plaintext password from `FILE` (first line; - for stdin); the agent hashes it")
	fs.StringVar(&f.passwordHash, "password-hash-file", "", "--user's crypt(3) password hash from `FILE` (- for stdin)")
	fs.StringVar(&f.passwordSecret, "password-secret", "", "--user's password from the agent's secrets directory: secret `NAME`")
	fs.StringVar(&f.sudo, "sudo", "", "--user's sudoers `RULE`, e.g. 'ALL=(ALL) NOPASSWD:ALL'")
	fs.StringVar(&f.groups, "groups", "", "--user's supplementary `GROUPS`, comma-separated")
	fs.StringVar(&f.shell, "shell", "", "--user's log-in shell `PATH`")
	fs.BoolVar(&f.lockPassword, "lock-password", false, "false allows --user to log in with the password (cloud-init locks it by default)")
	// root
	fs.StringVar(&f.rootPasswordFile, "root-password-file", "", "root's plaintext password from `FILE` (first line; - for stdin); the agent hashes it")
	fs.StringVar(&f.rootHash, "root-password-hash-file", "", "root's crypt(3) password hash from `FILE` (- for stdin)")
	fs.StringVar(&f.rootSecret, "root-password-secret", "", "root's password from the agent's secrets directory: secret `NAME`")
	fs.StringArrayVar(&f.rootSSHKeys, "root-ssh-key", nil, "authorized keys `FILE` for root (repeatable)")
	fs.BoolVar(&f.rootLock, "root-lock-password", false, "true locks root's password (default: left usable)")
	// network
	fs.StringArrayVar(&f.nics, "nic", nil, "guest NIC `SPEC`: the MAC, then comma-separated name=IF, ip=CIDR|dhcp|none, gw=IP, ip6=CIDR|dhcp|slaac|none, gw6=IP, mtu=N; e.g. 52:54:00:12:34:56,ip=192.0.2.10/24,gw=192.0.2.1 (repeatable)")
	fs.StringArrayVar(&f.dns, "dns", nil, "name server `IP` for the NICs (repeatable, or comma-separated)")
	fs.StringArrayVar(&f.dnsSearch, "dns-search", nil, "DNS search `DOMAIN` (repeatable, or comma-separated)")
	fs.StringVar(&f.networkConfig, "network-config", "", "raw cloud-init network-config v1/v2 YAML `FILE` (instead of --nic/--dns)")
	fs.StringVar(&f.networkData, "network-data", "", "OpenStack network_data.json `FILE` (configdrive; instead of --nic/--dns)")
	// content
	fs.StringArrayVar(&f.files, "file", nil, "write `SRC:DEST[:MODE[:OWNER]]` in the guest: the local file SRC as DEST (repeatable)")
	fs.StringArrayVar(&f.runcmd, "runcmd", nil, "run shell `COMMAND` at first boot (repeatable)")
	fs.StringArrayVar(&f.runcmdArgv, "runcmd-argv", nil, "run a `JSON-ARRAY` argv without a shell at first boot, e.g. '[\"touch\",\"/x\"]' (repeatable)")
	fs.StringVar(&f.userData, "user-data", "", "extra user-data `FILE` (#cloud-config, script, MIME, ...)")
	fs.StringVar(&f.userDataSecret, "user-data-secret", "", "user-data from the agent's secrets directory: secret `NAME`")
	fs.StringVar(&f.userDataMode, "user-data-mode", "", "combine user-data with the generated config: `merge|replace` (default merge)")
	fs.StringVar(&f.vendorData, "vendor-data", "", "vendor-data `FILE`")
	fs.StringVar(&f.metaDataFile, "meta-data", "", "extra meta-data from a JSON object `FILE`")
	fs.StringArrayVar(&f.meta, "meta", nil, "extra meta-data `KEY=VALUE` (a string; repeatable; overrides --meta-data)")
	// first-boot extras
	fs.StringVar(&f.powerState, "power-state", "", "after provisioning: `poweroff|reboot`")
	fs.IntVar(&f.powerDelay, "power-delay", 0, "--power-state after `MINUTES`")
	fs.StringVar(&f.powerMessage, "power-message", "", "--power-state console `MESSAGE`")
	fs.IntVar(&f.powerTimeout, "power-timeout", 0, "--power-state: `SECONDS` to wait for cloud-init first")
	fs.StringVar(&f.powerCondition, "power-condition", "", "--power-state only if the shell `COMMAND` exits 0")
	fs.StringVar(&f.phoneHome, "phone-home", "", "POST instance data to `URL` when provisioning ends")
	fs.StringVar(&f.phoneHomePost, "phone-home-post", "", "--phone-home `VALUES` to post, comma-separated (default all)")
	fs.IntVar(&f.phoneHomeTries, "phone-home-tries", 0, "--phone-home `TRIES`")
	fs.StringVar(&f.randomSeedFile, "random-seed-file", "", "entropy for the guest from `FILE` (16-4096 bytes)")
	fs.IntVar(&f.randomSeedBytes, "random-seed-bytes", 0, "entropy for the guest: the agent generates `N` bytes")
	defineIgnitionFlags(cmd, &f.ign)
	defineCredentialsFlags(cmd, &f.creds)
	// submission
	fs.BoolVar(&f.printJob, "print-job", false, "print the job document and exit without submitting it")
	for _, name := range []string{"ssh-key", "default-ssh-key", "root-ssh-key", "domain-xml", "password-file", "password-hash-file",
		"root-password-file", "root-password-hash-file", "network-config", "network-data", "user-data", "vendor-data", "meta-data",
		"random-seed-file", "prebuilt-image", "motd-file", "issue-file"} {
		_ = cmd.MarkFlagFilename(name)
	}
	for name, words := range map[string][]string{"format": {"nocloud", "configdrive", "ignition"}, "media": {"iso", "vfat"},
		"user-data-mode": {"merge", "replace"}, "power-state": {"poweroff", "reboot"},
		"regenerate-ssh-host-keys": {"true", "false"}, "ssh-password-auth": {"true", "false"},
		"lock-password": {"true", "false"}, "root-lock-password": {"true", "false"}, "credentials-delivery": {"smbios", "fwcfg"},
		"ignition-delivery": {"fwcfg", "blockdev", "configdrive", "nocloud"}} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(words, cobra.ShellCompDirectiveNoFileComp))
	}
	f.submitOptions.add(cmd)
}

// runRun builds the job of "vmpayload run" from the flags f (cmd's) and the
// positional arguments pos, and prints or submits it.
func runRun(cmd *cobra.Command, f *runFlags, pos []string, stdout, stderr io.Writer) int {
	if len(pos) != 1 {
		if len(pos) == 0 {
			fmt.Fprintln(stderr, "vmpayload run: the domain name is missing")
		} else {
			fmt.Fprintf(stderr, "vmpayload run: one domain at a time (got %s)\n", strings.Join(pos, " "))
		}
		_ = usageError(cmd)
		return exitUsage
	}
	b := &jobBuilder{flags: cmd.Flags(), origin: map[string]string{}, stdin: cmp.Or[io.Reader](runStdin, os.Stdin)}
	j, err := b.build(pos[0], f)
	if err != nil {
		fmt.Fprintf(stderr, "vmpayload run: %v\n", err)
		return exitUsage
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep "echo hi > /tmp/x" readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(j); err != nil {
		fmt.Fprintf(stderr, "vmpayload run: encoding the job: %v\n", err)
		return exitUsage
	}
	data := buf.Bytes()
	// the checks submit, validate and the agent make (payload.Check)
	parsed, _, rep := payload.Check(data, payload.CheckOptions{Agent: true})
	if !rep.OK() {
		b.report(stderr, rep.Errors)
		return exitInvalid
	}
	if f.printJob {
		stdout.Write(data)
		return exitOK
	}
	return submitJob("run", &f.submitOptions, parsed, data, b.report, stdout, stderr)
}

// jobBuilder turns flags into a job and remembers which flag set which
// field, so that validation errors name the flag.
type jobBuilder struct {
	flags     *pflag.FlagSet    // run's flags: which were given
	origin    map[string]string // job field path -> "--flag VALUE"
	stdin     io.Reader
	stdinUsed string // the flag that read standard input
}

// set records that the field at path came from flag name with value shown
// (already quoted or a file name).
func (b *jobBuilder) set(path, name, shown string) {
	if shown == "" {
		b.origin[path] = "--" + name
		return
	}
	b.origin[path] = "--" + name + " " + shown
}

// setGiven records, for each given flag of fields (job field under prefix ->
// flag name), that it set its field; with quote the value of a string flag
// is shown, quoted.
func (b *jobBuilder) setGiven(prefix string, fields map[string]string, quote bool) {
	for field, name := range fields {
		if fl := b.flags.Lookup(name); fl.Changed {
			v := ""
			if quote && fl.Value.Type() == "string" && fl.Value.String() != "" {
				v = strconv.Quote(fl.Value.String())
			}
			b.set(prefix+field, name, v)
		}
	}
}

// firstGiven returns the first of names that was given, or "".
func (b *jobBuilder) firstGiven(names ...string) string {
	for _, n := range names {
		if b.flags.Changed(n) {
			return n
		}
	}
	return ""
}

// optBool is the bool flag name's value v when it was given, else nil (the
// image's default).
func (b *jobBuilder) optBool(name string, v bool) *bool {
	if !b.flags.Changed(name) {
		return nil
	}
	return &v
}

// flagFor returns the flag that set field (or a field containing it).
func (b *jobBuilder) flagFor(field string) string {
	for p := field; p != ""; {
		if o, ok := b.origin[p]; ok {
			return o
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return ""
}

// report prints validation errors, each with the flag behind its field.
func (b *jobBuilder) report(w io.Writer, errs []job.FieldError) {
	for _, fe := range errs {
		if fl := b.flagFor(fe.Field); fl != "" {
			fmt.Fprintf(w, "%s: %s\n", fl, fe.String())
		} else {
			fmt.Fprintln(w, fe.String())
		}
	}
}

// read reads the file a flag names ("-" is standard input, at most once).
func (b *jobBuilder) read(name, file string, limit int64) ([]byte, error) {
	if file == "-" {
		if b.stdinUsed != "" && b.stdinUsed != name {
			return nil, fmt.Errorf("--%s -: standard input is already read by --%s", name, b.stdinUsed)
		}
		b.stdinUsed = name
		data, err := io.ReadAll(io.LimitReader(b.stdin, limit+1))
		if err != nil {
			return nil, fmt.Errorf("--%s -: reading standard input: %w", name, err)
		}
		if int64(len(data)) > limit {
			return nil, fmt.Errorf("--%s -: more than %d bytes", name, limit)
		}
		return data, nil
	}
	file = expandHome(file)
	st, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %w", name, file, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("--%s %q: is a directory", name, file)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("--%s %q: the file has %d bytes; the limit is %d", name, file, st.Size(), limit)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", name, err)
	}
	return data, nil
}

// readString reads the file of flag name (nothing when file is "") into
// *dst, the job field at path.
func (b *jobBuilder) readString(name, file, path string, dst *string) error {
	if file == "" {
		return nil
	}
	data, err := b.read(name, file, job.MaxJobBytes)
	if err != nil {
		return err
	}
	*dst = string(data)
	b.set(path, name, file)
	return nil
}

// expandHome expands a leading "~/" (the shell does not after "--flag=").
func expandHome(p string) string {
	if strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, p[2:])
		}
	}
	return p
}

// secretLine reads a password or hash into *dst, the job field at path: the
// first line of the file (nothing when file is ""), which must not be empty.
// The value is never quoted in errors.
func (b *jobBuilder) secretLine(name, file, path string, dst *string) error {
	if file == "" {
		return nil
	}
	data, err := b.read(name, file, 64<<10)
	if err != nil {
		return err
	}
	s := string(data)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		if strings.TrimSpace(s[i+1:]) != "" {
			return fmt.Errorf("--%s %s: the file has more than one line (the value is its only line)", name, file)
		}
		s = s[:i]
	}
	s = strings.TrimSuffix(s, "\r")
	if s == "" {
		return fmt.Errorf("--%s %s: the file is empty", name, file)
	}
	*dst = s
	b.set(path, name, file)
	return nil
}

// keys reads authorized_keys lines (blank lines and # comments skipped).
func (b *jobBuilder) keys(name string, files []string, path string, dst *[]string) error {
	for _, file := range files {
		data, err := b.read(name, file, 1<<20)
		if err != nil {
			return err
		}
		n := 0
		for _, l := range strings.Split(string(data), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			b.set(fmt.Sprintf("%s[%d]", path, len(*dst)), name, file)
			*dst = append(*dst, l)
			n++
		}
		if n == 0 {
			return fmt.Errorf("--%s %s: no key in the file", name, file)
		}
	}
	return nil
}

// text returns file content as a string, or reports that it is not UTF-8.
func text(data []byte) (string, bool) {
	return string(data), utf8.Valid(data) && !bytes.ContainsRune(data, 0)
}

func (b *jobBuilder) build(domain string, f *runFlags) (*job.Job, error) {
	j := &job.Job{Version: job.Version, Domain: domain, ID: f.id, InstanceID: f.instanceID,
		Format: job.Format(f.format), Media: job.Media(f.media), PrebuiltImage: f.prebuilt,
		Hostname: f.hostname, Timezone: f.timezone, Locale: f.locale,
		RegenerateSSHHostKeys: b.optBool("regenerate-ssh-host-keys", f.regenHostKeys),
		SSHPasswordAuth:       b.optBool("ssh-password-auth", f.sshPasswordAuth),
		UserDataSecret:        f.userDataSecret, UserDataMode: job.UserDataMode(f.userDataMode)}
	b.origin["domain"] = fmt.Sprintf("DOMAIN %q", domain)
	b.setGiven("", map[string]string{"id": "id", "instance_id": "instance-id", "format": "format", "media": "media",
		"prebuilt_image": "prebuilt-image", "hostname": "hostname", "timezone": "timezone", "locale": "locale",
		"regenerate_ssh_host_keys": "regenerate-ssh-host-keys", "ssh_password_auth": "ssh-password-auth",
		"user_data_secret": "user-data-secret", "user_data_mode": "user-data-mode"}, true)
	switch {
	case f.attach && f.detach:
		return nil, errors.New("--attach and --detach cannot be used together")
	case f.attach:
		j.Action = job.ActionAttach
		b.set("action", "attach", "")
	case f.detach:
		j.Action = job.ActionDetach
		b.set("action", "detach", "")
		if n := b.firstGiven(contentFlags...); n != "" {
			return nil, fmt.Errorf("--detach removes the payload; --%s has nothing to do with it", n)
		}
	}
	if err := b.readString("domain-xml", f.domainXML, "domain_xml", &j.DomainXML); err != nil {
		return nil, err
	}

	// users: --user, then root
	if f.user != "" {
		u := job.User{Name: f.user, Sudo: f.sudo, Shell: f.shell, PasswordSecret: f.passwordSecret,
			LockPassword: b.optBool("lock-password", f.lockPassword)}
		p := fmt.Sprintf("users[%d]", len(j.Users))
		b.set(p, "user", strconv.Quote(f.user))
		if f.groups != "" {
			u.Groups = splitList(f.groups)
			b.set(p+".groups", "groups", strconv.Quote(f.groups))
		}
		b.setGiven(p+".", map[string]string{"sudo": "sudo", "shell": "shell", "password_secret": "password-secret", "lock_password": "lock-password"}, false)
		if err := b.secretLine("password-file", f.passwordFile, p+".password", &u.Password); err != nil {
			return nil, err
		}
		if err := b.secretLine("password-hash-file", f.passwordHash, p+".password_hash", &u.PasswordHash); err != nil {
			return nil, err
		}
		if err := b.keys("ssh-key", f.sshKeys, p+".ssh_authorized_keys", &u.SSHAuthorizedKeys); err != nil {
			return nil, err
		}
		j.Users = append(j.Users, u)
	} else if n := b.firstGiven("password-file", "password-hash-file", "password-secret", "sudo", "groups", "shell", "lock-password", "default-ssh-key"); n != "" {
		return nil, fmt.Errorf("--%s needs --user NAME (root has --root-* flags)", n)
	}
	if f.rootPasswordFile != "" || f.rootHash != "" || f.rootSecret != "" || len(f.rootSSHKeys) > 0 || b.flags.Changed("root-lock-password") {
		u := job.User{Name: "root", PasswordSecret: f.rootSecret, LockPassword: b.optBool("root-lock-password", f.rootLock)}
		p := fmt.Sprintf("users[%d]", len(j.Users))
		b.set(p, b.firstGiven("root-password-file", "root-password-hash-file", "root-password-secret", "root-ssh-key", "root-lock-password"), "")
		if err := b.secretLine("root-password-file", f.rootPasswordFile, p+".password", &u.Password); err != nil {
			return nil, err
		}
		if err := b.secretLine("root-password-hash-file", f.rootHash, p+".password_hash", &u.PasswordHash); err != nil {
			return nil, err
		}
		if b.flags.Changed("root-password-secret") {
			b.set(p+".password_secret", "root-password-secret", strconv.Quote(f.rootSecret))
		}
		if b.flags.Changed("root-lock-password") {
			b.set(p+".lock_password", "root-lock-password", "")
		}
		if err := b.keys("root-ssh-key", f.rootSSHKeys, p+".ssh_authorized_keys", &u.SSHAuthorizedKeys); err != nil {
			return nil, err
		}
		j.Users = append(j.Users, u)
	}
	if f.user == "" {
		if err := b.keys("ssh-key", f.sshKeys, "ssh_authorized_keys", &j.SSHAuthorizedKeys); err != nil {
			return nil, err
		}
	}
	if err := b.keys("default-ssh-key", f.defaultSSHKeys, "ssh_authorized_keys", &j.SSHAuthorizedKeys); err != nil {
		return nil, err
	}
	for _, spec := range f.sshHostKeys {
		k, err := b.hostKey(spec)
		if err != nil {
			return nil, err
		}
		b.set(fmt.Sprintf("ssh_host_keys[%d]", len(j.SSHHostKeys)), "ssh-host-key", strconv.Quote(spec))
		j.SSHHostKeys = append(j.SSHHostKeys, k)
	}

	// network
	for _, spec := range f.nics {
		n, err := parseNIC(spec)
		if err != nil {
			return nil, fmt.Errorf("--nic %q: %w", spec, err)
		}
		b.set(fmt.Sprintf("nics[%d]", len(j.NICs)), "nic", strconv.Quote(spec))
		j.NICs = append(j.NICs, n)
	}
	if dns, search := splitList(f.dns...), splitList(f.dnsSearch...); len(dns) > 0 || len(search) > 0 {
		j.DNS = &job.DNS{Nameservers: dns, Search: search}
		b.set("dns", "dns", "")
		for i, s := range dns {
			b.set(fmt.Sprintf("dns.nameservers[%d]", i), "dns", strconv.Quote(s))
		}
		for i, s := range search {
			b.set(fmt.Sprintf("dns.search[%d]", i), "dns-search", strconv.Quote(s))
		}
	}
	if err := b.readString("network-config", f.networkConfig, "network_config", &j.NetworkConfig); err != nil {
		return nil, err
	}
	if err := b.jsonObject("network-data", f.networkData, "network_data", &j.NetworkData); err != nil {
		return nil, err
	}

	// content
	for _, spec := range f.files {
		fl, err := b.file(spec)
		if err != nil {
			return nil, err
		}
		b.set(fmt.Sprintf("files[%d]", len(j.Files)), "file", strconv.Quote(spec))
		j.Files = append(j.Files, fl)
	}
	for _, s := range f.runcmd {
		b.set(fmt.Sprintf("runcmd[%d]", len(j.Runcmd)), "runcmd", strconv.Quote(s))
		j.Runcmd = append(j.Runcmd, job.Command{Shell: s})
	}
	for _, s := range f.runcmdArgv {
		var argv []string
		if err := json.Unmarshal([]byte(s), &argv); err != nil || argv == nil {
			return nil, fmt.Errorf("--runcmd-argv %q: want a JSON array of strings such as '[\"touch\", \"/x\"]'", s)
		}
		b.set(fmt.Sprintf("runcmd[%d]", len(j.Runcmd)), "runcmd-argv", strconv.Quote(s))
		j.Runcmd = append(j.Runcmd, job.Command{Argv: argv})
	}
	if f.userData != "" {
		data, err := b.read("user-data", f.userData, job.MaxJobBytes)
		if err != nil {
			return nil, err
		}
		if s, ok := text(data); ok {
			j.UserData = s
			b.set("user_data", "user-data", f.userData)
		} else {
			j.UserDataBase64 = base64.StdEncoding.EncodeToString(data)
			b.set("user_data_base64", "user-data", f.userData)
		}
	}
	if err := b.readString("vendor-data", f.vendorData, "vendor_data", &j.VendorData); err != nil {
		return nil, err
	}
	if err := b.jsonObject("meta-data", f.metaDataFile, "meta_data", &j.MetaData); err != nil {
		return nil, err
	}
	for _, kv := range f.meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--meta %q: want KEY=VALUE", kv)
		}
		if j.MetaData == nil {
			j.MetaData = map[string]any{}
		}
		j.MetaData[k] = v
		b.set("meta_data."+k, "meta", strconv.Quote(kv))
	}

	// first-boot extras
	if f.powerState != "" {
		j.PowerState = &job.PowerState{Mode: f.powerState, DelayMinutes: f.powerDelay, Message: f.powerMessage, TimeoutSeconds: f.powerTimeout}
		if f.powerCondition != "" {
			j.PowerState.Condition = &job.Command{Shell: f.powerCondition}
		}
		b.set("power_state", "power-state", strconv.Quote(f.powerState))
		b.setGiven("power_state.", map[string]string{"delay_minutes": "power-delay", "message": "power-message", "timeout_seconds": "power-timeout", "condition": "power-condition"}, false)
	} else if n := b.firstGiven("power-delay", "power-message", "power-timeout", "power-condition"); n != "" {
		return nil, fmt.Errorf("--%s needs --power-state poweroff|reboot", n)
	}
	if f.phoneHome != "" {
		j.PhoneHome = &job.PhoneHome{URL: f.phoneHome, Tries: f.phoneHomeTries}
		if f.phoneHomePost != "" {
			j.PhoneHome.Post = splitList(f.phoneHomePost)
			b.set("phone_home.post", "phone-home-post", strconv.Quote(f.phoneHomePost))
		}
		b.set("phone_home", "phone-home", strconv.Quote(f.phoneHome))
		if b.flags.Changed("phone-home-tries") {
			b.set("phone_home.tries", "phone-home-tries", strconv.Itoa(f.phoneHomeTries))
		}
	} else if n := b.firstGiven("phone-home-post", "phone-home-tries"); n != "" {
		return nil, fmt.Errorf("--%s needs --phone-home URL", n)
	}
	if seedBytes := b.flags.Changed("random-seed-bytes"); f.randomSeedFile != "" || seedBytes {
		j.RandomSeed = &job.RandomSeed{GenerateBytes: f.randomSeedBytes}
		if seedBytes {
			b.set("random_seed", "random-seed-bytes", strconv.Itoa(f.randomSeedBytes))
		}
		if f.randomSeedFile != "" {
			data, err := b.read("random-seed-file", f.randomSeedFile, job.MaxRandomSeedBytes)
			if err != nil {
				return nil, err
			}
			j.RandomSeed.Data = base64.StdEncoding.EncodeToString(data)
			b.set("random_seed", "random-seed-file", f.randomSeedFile)
		}
	}
	if err := b.applyCredentials(j, f.creds); err != nil {
		return nil, err
	}
	if err := b.applyIgnition(j, f.ign, f.detach); err != nil {
		return nil, err
	}
	return j, nil
}

// contentFlags are the flags that give payload content (refused with --detach).
var contentFlags = []string{"hostname", "timezone", "locale", "ssh-key", "default-ssh-key", "regenerate-ssh-host-keys",
	"ssh-password-auth", "ssh-host-key", "user", "root-password-file", "root-password-hash-file", "root-password-secret",
	"root-ssh-key", "root-lock-password", "nic", "dns", "dns-search", "network-config", "network-data", "file", "runcmd",
	"runcmd-argv", "user-data", "user-data-secret", "user-data-mode", "vendor-data", "meta-data", "meta", "power-state",
	"phone-home", "random-seed-file", "random-seed-bytes", "format", "media", "prebuilt-image", "instance-id",
	"credentials-delivery", "keymap", "motd-file", "issue-file", "credential", "credential-file", "credential-secret"}

// jsonObject reads a JSON object from the file of flag name (nothing when
// file is ""), keeping numbers exact, into *dst, the job field at path.
func (b *jobBuilder) jsonObject(name, file, path string, dst *map[string]any) error {
	if file == "" {
		return nil
	}
	data, err := b.read(name, file, job.MaxJobBytes)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		if err == nil {
			err = errors.New("not an object")
		}
		return fmt.Errorf("--%s %s: want a JSON object: %w", name, file, err)
	}
	if dec.More() {
		return fmt.Errorf("--%s %s: more than one JSON value", name, file)
	}
	*dst = m
	b.set(path, name, file)
	return nil
}

// hostKey parses TYPE:SECRET[:PUBFILE].
func (b *jobBuilder) hostKey(spec string) (job.SSHHostKey, error) {
	parts := strings.SplitN(spec, ":", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return job.SSHHostKey{}, fmt.Errorf("--ssh-host-key %q: want TYPE:SECRET[:PUBFILE], e.g. ed25519:web1-host-ed25519", spec)
	}
	k := job.SSHHostKey{Type: parts[0], PrivateKeySecret: parts[1]}
	if len(parts) == 3 && parts[2] != "" {
		data, err := b.read("ssh-host-key", parts[2], 64<<10)
		if err != nil {
			return k, err
		}
		k.PublicKey = strings.TrimSpace(string(data))
	}
	return k, nil
}

// file parses SRC:DEST[:MODE[:OWNER]] and reads SRC.
func (b *jobBuilder) file(spec string) (job.File, error) {
	parts := strings.SplitN(spec, ":", 4)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return job.File{}, fmt.Errorf("--file %q: want SRC:DEST[:MODE[:OWNER]], e.g. ./motd:/etc/motd:0644", spec)
	}
	fl := job.File{Path: parts[1]}
	if len(parts) > 2 {
		fl.Permissions = parts[2]
	}
	if len(parts) > 3 {
		fl.Owner = parts[3]
	}
	data, err := b.read("file", parts[0], 16<<20)
	if err != nil {
		return fl, err
	}
	if s, ok := text(data); ok {
		fl.Content = s
	} else {
		fl.Content, fl.Encoding = base64.StdEncoding.EncodeToString(data), job.EncodingBase64
	}
	return fl, nil
}

// parseNIC parses MAC[,key=value...]; the values are checked by the job's
// validation, which names the field.
func parseNIC(spec string) (job.NIC, error) {
	parts := strings.Split(spec, ",")
	n := job.NIC{MAC: strings.TrimSpace(parts[0])}
	if n.MAC == "" || strings.Contains(n.MAC, "=") {
		return n, errors.New("the first element must be the MAC address, e.g. 52:54:00:12:34:56,ip=192.0.2.10/24,gw=192.0.2.1")
	}
	seen := map[string]bool{}
	var gw4, gw6 string
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return n, fmt.Errorf("%q is not KEY=VALUE", kv)
		}
		if seen[k] {
			return n, fmt.Errorf("%s is given twice", k)
		}
		seen[k] = true
		switch k {
		case "name":
			n.Name = v
		case "ip":
			n.IPv4 = ipConfig(v)
		case "ip6":
			n.IPv6 = ipConfig(v)
		case "gw":
			gw4 = v
		case "gw6":
			gw6 = v
		case "mtu":
			m, err := strconv.Atoi(v)
			if err != nil {
				return n, fmt.Errorf("mtu %q is not a number", v)
			}
			n.MTU = m
		default:
			return n, fmt.Errorf("unknown key %q (use gw, gw6, ip, ip6, mtu, name)", k)
		}
	}
	if gw4 != "" {
		if n.IPv4 == nil || n.IPv4.Method != job.MethodStatic {
			return n, errors.New("gw needs a static ip=ADDRESS/PREFIX")
		}
		n.IPv4.Gateway = gw4
	}
	if gw6 != "" {
		if n.IPv6 == nil || n.IPv6.Method != job.MethodStatic {
			return n, errors.New("gw6 needs a static ip6=ADDRESS/PREFIX")
		}
		n.IPv6.Gateway = gw6
	}
	return n, nil
}

// ipConfig reads "dhcp", "slaac", "none" or an address in CIDR form.
func ipConfig(v string) *job.IPConfig {
	switch v {
	case job.MethodDHCP, job.MethodSLAAC, job.MethodNone:
		return &job.IPConfig{Method: v}
	}
	return &job.IPConfig{Method: job.MethodStatic, Address: v}
}
