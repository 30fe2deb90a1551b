// Package job defines vmpayload's job document, version 1: the JSON that
// orchestrators drop into the spool or post to the agent's socket. It decodes
// a document strictly (unknown keys, wrong types and duplicate keys are
// errors) and validates every field, reporting all problems at once, each
// with the path of the field it concerns.
package job

import "github.com/vmpayload/vmpayload/payload/image"

// Version is the only job document version this package understands.
const Version = 1

// MaxJobBytes is the largest job document accepted.
const MaxJobBytes = 1 << 20

// Action says what the agent does with a job's payload.
type Action string

// Actions a job may ask for.
const (
	ActionStart  Action = "start"
	ActionAttach Action = "attach"
	ActionDetach Action = "detach"
)

// Format is the cloud-init datasource layout of the payload.
type Format string

// Payload formats.
const (
	FormatNoCloud     Format = "nocloud"
	FormatConfigDrive Format = "configdrive"
	// FormatIgnition makes the job produce an Ignition config (Fedora
	// CoreOS, Flatcar, RHCOS) instead of cloud-init documents; see
	// docs/ignition.md.
	FormatIgnition Format = "ignition"
	// FormatSysprep puts a Windows answer file (Unattend.xml or
	// Autounattend.xml) on a floppy or a CD-ROM, as oVirt does for
	// Windows guests; see docs/windows.md (Sysprep).
	FormatSysprep Format = "sysprep"
	// FormatCredentials passes systemd system credentials in the domain
	// definition itself (SMBIOS OEM strings or QEMU fw_cfg entries), for
	// guests without cloud-init; see docs/credentials.md.
	FormatCredentials Format = "credentials"
)

// IgnitionDelivery is how an Ignition config reaches the guest.
type IgnitionDelivery string

// Ignition deliveries.
const (
	// DeliveryFwCfg is QEMU's firmware configuration device (the name
	// opt/com.coreos/config), which Ignition's qemu platform reads.
	DeliveryFwCfg IgnitionDelivery = "fwcfg"
	// DeliveryConfigDrive is a config-2 image with the config as
	// openstack/latest/user_data (Ignition's openstack, kubevirt and
	// nutanix platforms).
	DeliveryConfigDrive IgnitionDelivery = "configdrive"
	// DeliveryNoCloud is a cidata image with the config as user-data
	// (Ignition's kubevirt, proxmoxve and ibmcloud platforms).
	DeliveryNoCloud IgnitionDelivery = "nocloud"
	// DeliveryBlockdev is the config file itself as a read-only raw virtio
	// disk whose serial is "ignition" (/dev/disk/by-id/virtio-ignition),
	// which Ignition's qemu platform reads on s390x and ppc64le, where QEMU
	// has no fw_cfg. The agent's default there.
	DeliveryBlockdev IgnitionDelivery = "blockdev"
)

// Media is the filesystem of the payload image: image.Media, the one
// definition of the media the image writer builds.
type Media = image.Media

// Payload media.
const (
	MediaISO  = image.MediaISO
	MediaVFAT = image.MediaVFAT
)

// UserDataMode says how user-supplied user-data combines with generated config.
type UserDataMode string

// User-data modes.
const (
	ModeMerge   UserDataMode = "merge"
	ModeReplace UserDataMode = "replace"
)

// Job is a version 1 job document. Field names are a public contract.
type Job struct {
	Version       int    `json:"version"`
	ID            string `json:"id,omitempty"`
	Domain        string `json:"domain,omitempty"`
	Action        Action `json:"action,omitempty"`
	DomainXML     string `json:"domain_xml,omitempty"`
	Format        Format `json:"format,omitempty"`
	Media         Media  `json:"media,omitempty"`
	PrebuiltImage string `json:"prebuilt_image,omitempty"`
	InstanceID    string `json:"instance_id,omitempty"`

	Hostname              string    `json:"hostname,omitempty"`
	Timezone              string    `json:"timezone,omitempty"`
	Users                 []User    `json:"users,omitempty"`
	SSHAuthorizedKeys     []string  `json:"ssh_authorized_keys,omitempty"`
	RegenerateSSHHostKeys *bool     `json:"regenerate_ssh_host_keys,omitempty"`
	SSHPasswordAuth       *bool     `json:"ssh_password_auth,omitempty"`
	DNS                   *DNS      `json:"dns,omitempty"`
	NICs                  []NIC     `json:"nics,omitempty"`
	Files                 []File    `json:"files,omitempty"`
	Runcmd                []Command `json:"runcmd,omitempty"`

	Locale      string       `json:"locale,omitempty"`
	SSHHostKeys []SSHHostKey `json:"ssh_host_keys,omitempty"`
	PowerState  *PowerState  `json:"power_state,omitempty"`
	PhoneHome   *PhoneHome   `json:"phone_home,omitempty"`
	RandomSeed  *RandomSeed  `json:"random_seed,omitempty"`

	UserData       string         `json:"user_data,omitempty"`
	UserDataBase64 string         `json:"user_data_base64,omitempty"`
	UserDataSecret string         `json:"user_data_secret,omitempty"`
	UserDataMode   UserDataMode   `json:"user_data_mode,omitempty"`
	MetaData       map[string]any `json:"meta_data,omitempty"`
	NetworkConfig  string         `json:"network_config,omitempty"`
	VendorData     string         `json:"vendor_data,omitempty"`
	// VendorDataBase64 is vendor-data as base64, for content a JSON string
	// cannot hold (gzip-compressed vendor-data). Optional; not with
	// vendor_data.
	VendorDataBase64 string `json:"vendor_data_base64,omitempty"`
	// NetworkData is a raw OpenStack network_data.json object, written
	// as it is with format "configdrive".
	NetworkData map[string]any `json:"network_data,omitempty"`

	// GuestReport turns the guest's provisioning report on or off for this
	// job (docs/guest-report.md): the payload then carries the reporter and
	// the domain gets the report channel. Absent: the agent's guest_report
	// setting. It reaches the image (the user-data gains the reporter part)
	// but not the derived instance-id.
	GuestReport *bool `json:"guest_report,omitempty"`

	// Ignition is the user's own Ignition config (any stable spec
	// 3.0.0-3.6.0), merged with the config generated from the job's
	// fields; format "ignition" only. Not with ignition_base64.
	Ignition map[string]any `json:"ignition,omitempty"`
	// IgnitionBase64 is the user's Ignition config as base64 of its JSON
	// text. Not with ignition.
	IgnitionBase64 string `json:"ignition_base64,omitempty"`
	// Butane is the user's own config as a Butane config (YAML; variants
	// fcos, flatcar, fiot and r4e, their stable versions), translated
	// with Butane's library into the Ignition config that is merged like
	// ignition. Not with ignition or ignition_base64.
	Butane string `json:"butane,omitempty"`
	// IgnitionDelivery is how the Ignition config reaches the guest;
	// format "ignition" only, default "fwcfg" ("blockdev" when the agent
	// runs it for an s390x or ppc64/ppc64le domain).
	IgnitionDelivery IgnitionDelivery `json:"ignition_delivery,omitempty"`

	// GuestOS says which system the guest runs: "" or "linux" (cloud-init,
	// the default) or "windows" (cloudbase-init; docs/windows.md). A
	// Windows guest's host name is checked against the NetBIOS rule, its
	// user-data against cloudbase-init's reader, and no cloud-config is
	// generated for it.
	GuestOS GuestOS `json:"guest_os,omitempty"`
	// AdminUsername is the administrator account cloudbase-init creates or
	// updates (meta_data.json meta.admin_username); guest_os "windows",
	// format "configdrive" only.
	AdminUsername string `json:"admin_username,omitempty"`
	// AdminPasswordSecret names the secret holding the administrator's
	// plaintext password (its first line): cloudbase-init sets it from
	// meta_data.json admin_pass (guest_os "windows", format "configdrive"),
	// a sysprep answer file takes it as its {{admin_password}} (format
	// "sysprep"). The plaintext reaches the image only; recipes keep the
	// name. No other format takes it.
	AdminPasswordSecret string `json:"admin_password_secret,omitempty"`
	// AdminCerts are PEM X.509 certificates cloudbase-init maps to the
	// administrator for WinRM certificate authentication (the first as
	// meta_data.json meta.admin_cert0..N, the others as keys entries of
	// type "x509"). guest_os "windows", format "configdrive" only.
	AdminCerts []string `json:"admin_certs,omitempty"`
	// Sysprep is the Windows answer file (unattend XML) as text; format
	// "sysprep" only. Exactly one of sysprep, sysprep_base64 and
	// sysprep_secret.
	Sysprep string `json:"sysprep,omitempty"`
	// SysprepBase64 is the answer file as base64 of its UTF-8 bytes (a
	// file as Windows System Image Manager saved it, byte order mark
	// included). Not with sysprep or sysprep_secret.
	SysprepBase64 string `json:"sysprep_base64,omitempty"`
	// SysprepSecret names a secret holding the answer file (for one that
	// carries passwords itself); never quoted in messages.
	SysprepSecret string `json:"sysprep_secret,omitempty"`
	// SysprepFileName is the answer file's name on the medium:
	// "Unattend.xml" (default) or "Autounattend.xml".
	SysprepFileName string `json:"sysprep_file_name,omitempty"`
	// SysprepMedium is the drive the answer file reaches Windows on:
	// "floppy" (default, a 1.44 MB vfat floppy) or "cdrom" (an ISO with
	// Joliet).
	SysprepMedium SysprepMedium `json:"sysprep_medium,omitempty"`
	// WindowsTimezone is a Windows time zone name ("W. Europe Standard
	// Time") for the answer file's {{timezone}}; without it the job's
	// IANA timezone is mapped to one.
	WindowsTimezone string `json:"windows_timezone,omitempty"`
	// JoinDomain is the Active Directory domain the computer joins, for
	// the answer file's {{join_domain}} (oVirt's $JoinDomain$); format
	// "sysprep" only, like the fields below.
	JoinDomain string `json:"join_domain,omitempty"`
	// DomainAdmin is the account that joins it ({{domain_admin}},
	// $DomainAdmin$).
	DomainAdmin string `json:"domain_admin,omitempty"`
	// DomainAdminPasswordSecret names the secret holding that account's
	// password, its first line ({{domain_admin_password}},
	// $DomainAdminPassword$). The plaintext reaches the image only.
	DomainAdminPasswordSecret string `json:"domain_admin_password_secret,omitempty"`
	// MachineObjectOU is the distinguished name of the OU the computer
	// account is created in ({{machine_object_ou}}, $MachineObjectOU$).
	MachineObjectOU string `json:"machine_object_ou,omitempty"`
	// ProductKeySecret names the secret holding the Windows product key
	// ({{product_key}}, $ProductKey$), five groups of five characters.
	ProductKeySecret string `json:"product_key_secret,omitempty"`
	// OrgName is the organisation Windows is registered to ({{org_name}},
	// $OrgName$).
	OrgName string `json:"org_name,omitempty"`
	// InputLocale is the keyboard layout(s) ({{input_locale}},
	// $InputLocale$): language tags ("de-DE") or layout ids
	// ("0407:00000407"), separated by ";".
	InputLocale string `json:"input_locale,omitempty"`
	// UILanguage is the display language ({{ui_language}}, $UILanguage$ and
	// $SetupUiLanguageUiLanguage$), a language tag ("en-US").
	UILanguage string `json:"ui_language,omitempty"`
	// SystemLocale is the language of non-Unicode programs
	// ({{system_locale}}, $SystemLocale$), a language tag.
	SystemLocale string `json:"system_locale,omitempty"`
	// UserLocale is the format of dates, numbers and currencies
	// ({{user_locale}}, $UserLocale$), a language tag.
	UserLocale string `json:"user_locale,omitempty"`

	// Keymap is the console keymap (systemd's firstboot.keymap); format
	// "credentials" only, like the fields below (docs/credentials.md).
	Keymap string `json:"keymap,omitempty"`
	// Motd is the message of the day (login.motd).
	Motd string `json:"motd,omitempty"`
	// Issue is the pre-login banner (login.issue).
	Issue string `json:"issue,omitempty"`
	// Credentials are further systemd credentials by name: a JSON string
	// (text) or {"base64": "..."} (binary).
	Credentials Credentials `json:"credentials,omitempty"`
	// CredentialSecrets maps a credential name to the secret whose
	// content becomes that credential; never by SMBIOS.
	CredentialSecrets CredentialSecrets `json:"credential_secrets,omitempty"`
	// CredentialsDelivery is how the credentials reach the guest: "smbios"
	// or "fwcfg" (the default when the job carries a secret).
	CredentialsDelivery CredentialsDelivery `json:"credentials_delivery,omitempty"`
}

// GuestOS is the operating system family of the guest.
type GuestOS string

// Guest operating systems.
const (
	GuestLinux   GuestOS = "linux"
	GuestWindows GuestOS = "windows"
)

// IsWindows reports whether the job is for a Windows guest (cloudbase-init).
func (j *Job) IsWindows() bool { return KindTraits(j).Windows }

// SSHHostKey is a host key pair the guest's SSH server gets instead of
// generated ones. The private key is only ever a secret reference.
type SSHHostKey struct {
	Type             string `json:"type"`
	PrivateKeySecret string `json:"private_key_secret"`
	PublicKey        string `json:"public_key,omitempty"`
}

// SSH host key types.
const (
	HostKeyEd25519 = "ed25519"
	HostKeyECDSA   = "ecdsa"
	HostKeyRSA     = "rsa"
)

// PowerState asks cloud-init to power the guest off or reboot it once
// provisioning has finished.
type PowerState struct {
	Mode           string   `json:"mode"`
	DelayMinutes   int      `json:"delay_minutes,omitempty"`
	Message        string   `json:"message,omitempty"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty"`
	Condition      *Command `json:"condition,omitempty"`
}

// Power state modes.
const (
	PowerOff = "poweroff"
	Reboot   = "reboot"
)

// PhoneHome asks cloud-init to POST instance data to a URL at the end of
// provisioning.
type PhoneHome struct {
	URL   string   `json:"url"`
	Post  []string `json:"post,omitempty"`
	Tries int      `json:"tries,omitempty"`
}

// PhoneHomeKeys are the values phone_home.post may name.
var PhoneHomeKeys = []string{"pub_key_rsa", "pub_key_ecdsa", "pub_key_ed25519", "instance_id", "hostname", "fqdn"}

// RandomSeed is entropy handed to the guest: either given (Data, base64)
// or generated from the host's CSPRNG when the payload is built
// (GenerateBytes).
type RandomSeed struct {
	Data          string `json:"data,omitempty"`
	GenerateBytes int    `json:"generate_bytes,omitempty"`
}

// Random seed limits.
const (
	MinRandomSeedBytes = 16
	MaxRandomSeedBytes = 4096
)

// User is an account cloud-init creates in the guest. The name "root"
// configures the existing root account instead.
type User struct {
	Name              string   `json:"name"`
	Password          string   `json:"password,omitempty"`
	PasswordHash      string   `json:"password_hash,omitempty"`
	PasswordSecret    string   `json:"password_secret,omitempty"`
	SSHAuthorizedKeys []string `json:"ssh_authorized_keys,omitempty"`
	Sudo              string   `json:"sudo,omitempty"`
	Groups            []string `json:"groups,omitempty"`
	Shell             string   `json:"shell,omitempty"`
	LockPassword      *bool    `json:"lock_password,omitempty"`
}

// DNS is the resolver configuration applied to the guest's static NICs.
type DNS struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Search      []string `json:"search,omitempty"`
}

// NIC is a guest network interface, matched by MAC address.
type NIC struct {
	Name string    `json:"name,omitempty"`
	MAC  string    `json:"mac"`
	MTU  int       `json:"mtu,omitempty"`
	IPv4 *IPConfig `json:"ipv4,omitempty"`
	IPv6 *IPConfig `json:"ipv6,omitempty"`
}

// IPConfig is one address family's configuration on a NIC.
type IPConfig struct {
	Method  string `json:"method"`
	Address string `json:"address,omitempty"`
	Gateway string `json:"gateway,omitempty"`
}

// IP configuration methods.
const (
	MethodStatic = "static"
	MethodDHCP   = "dhcp"
	MethodSLAAC  = "slaac"
	MethodNone   = "none"
)

// File is a file cloud-init writes in the guest.
type File struct {
	Path        string `json:"path"`
	Content     string `json:"content"`
	Encoding    string `json:"encoding,omitempty"`
	Permissions string `json:"permissions,omitempty"`
	Owner       string `json:"owner,omitempty"`
}

// File content encodings.
const (
	EncodingText   = "text"
	EncodingBase64 = "base64"
)

// Command is one runcmd entry: either a shell string or an argv list.
type Command struct {
	Shell string
	Argv  []string
}

// IsArgv reports whether the command is an argv list rather than a shell string.
func (c Command) IsArgv() bool { return c.Argv != nil }

// withDefaults returns a copy of j with the fixed defaults filled in for the fields
// that have them (action, format, media, user_data_mode).
func (j Job) withDefaults() Job {
	if j.Action == "" {
		j.Action = ActionStart
	}
	// the format, and its kind's defaults; a credentials job (one with a
	// credentials delivery) has no medium
	hooks().Defaults(&j)
	if j.Media == "" && j.CredentialsDelivery == "" {
		j.Media = MediaISO
	}
	if j.UserDataMode == "" {
		j.UserDataMode = ModeMerge
	}
	return j
}
