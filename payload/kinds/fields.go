package kinds

import (
	"slices"
	"sync"

	"github.com/vmpayload/vmpayload/payload/job"
)

// The kinds that refuse fields, as the field table names them: a job of
// format "ignition", one for guest_os "windows" (cloudbase-init), one of
// format "sysprep", one of format "credentials" (systemd credentials).
const (
	Ignition    = "ignition"
	Windows     = "windows"
	Sysprep     = "sysprep"
	Credentials = "credentials"
)

// Field is a job field that not every kind takes.
type Field struct {
	Name string
	Set  func(*job.Job) bool
	// Only names the one kind that takes the field: every other kind
	// refuses it ("only used with format …").
	Only string
	// Why is, for each kind that cannot carry the field, the reason.
	Why map[string]string
}

// Reasons shared by several rows.
const (
	answerFileAlone = "the payload is the Windows answer file alone; configure this in the answer file"
	ignNoNetwork    = "Ignition has no network settings (NetworkManager keyfiles on Fedora CoreOS and RHCOS, systemd-networkd units on Flatcar); write them with files or in your ignition config"
	cbiNoVendorData = "cloudbase-init does not read vendor-data"

	credsNoInstanceID = "systemd has no instance id; firstboot.* and passwd.* credentials apply on the guest's first boot (empty /etc/machine-id)"
	credsNoMedium     = "the credentials live in the domain definition, not on a medium"
	credsNoUserData   = "it is cloud-init user-data, which a credentials guest does not read"
	credsNoVendorData = "it is cloud-init vendor-data, which a credentials guest does not read"
	credsCloudbase    = "it is cloudbase-init's (Windows)"
)

// Fields returns the one table of which kind takes which job field, with
// the reason for each refusal. A field no row names is taken by every kind.
// A kind reports its refusals in the order of the rows; a field whose
// refusals come in a different order for two kinds has a row for each. The
// table is made on first use, not at every process start (issue 40).
func Fields() []Field {
	fields.once.Do(func() { fields.rows = fieldTable() })
	return fields.rows
}

var fields struct {
	once sync.Once
	rows []Field
}

func fieldTable() []Field {
	return []Field{
		{Name: "ignition", Set: func(j *job.Job) bool { return j.Ignition != nil }, Only: Ignition},
		{Name: "ignition_base64", Set: func(j *job.Job) bool { return j.IgnitionBase64 != "" }, Only: Ignition},
		{Name: "butane", Set: func(j *job.Job) bool { return j.Butane != "" }, Only: Ignition},
		{Name: "ignition_delivery", Set: func(j *job.Job) bool { return j.IgnitionDelivery != "" }, Only: Ignition},
		{Name: "sysprep", Set: func(j *job.Job) bool { return j.Sysprep != "" }, Only: Sysprep},
		{Name: "sysprep_base64", Set: func(j *job.Job) bool { return j.SysprepBase64 != "" }, Only: Sysprep},
		{Name: "sysprep_secret", Set: func(j *job.Job) bool { return j.SysprepSecret != "" }, Only: Sysprep},
		{Name: "sysprep_file_name", Set: func(j *job.Job) bool { return j.SysprepFileName != "" }, Only: Sysprep},
		{Name: "sysprep_medium", Set: func(j *job.Job) bool { return j.SysprepMedium != "" }, Only: Sysprep},
		{Name: "windows_timezone", Set: func(j *job.Job) bool { return j.WindowsTimezone != "" }, Only: Sysprep},
		{Name: "join_domain", Set: func(j *job.Job) bool { return j.JoinDomain != "" }, Only: Sysprep},
		{Name: "domain_admin", Set: func(j *job.Job) bool { return j.DomainAdmin != "" }, Only: Sysprep},
		{Name: "domain_admin_password_secret", Set: func(j *job.Job) bool { return j.DomainAdminPasswordSecret != "" }, Only: Sysprep},
		{Name: "machine_object_ou", Set: func(j *job.Job) bool { return j.MachineObjectOU != "" }, Only: Sysprep},
		{Name: "product_key_secret", Set: func(j *job.Job) bool { return j.ProductKeySecret != "" }, Only: Sysprep},
		{Name: "org_name", Set: func(j *job.Job) bool { return j.OrgName != "" }, Only: Sysprep},
		{Name: "input_locale", Set: func(j *job.Job) bool { return j.InputLocale != "" }, Only: Sysprep},
		{Name: "ui_language", Set: func(j *job.Job) bool { return j.UILanguage != "" }, Only: Sysprep},
		{Name: "system_locale", Set: func(j *job.Job) bool { return j.SystemLocale != "" }, Only: Sysprep},
		{Name: "user_locale", Set: func(j *job.Job) bool { return j.UserLocale != "" }, Only: Sysprep},
		// admin_password_secret is cloudbase-init's admin_pass and the answer
		// file's administrator password: the Windows rules check it

		{Name: "instance_id", Set: func(j *job.Job) bool { return j.InstanceID != "" }, Why: map[string]string{Ignition: "Ignition has no instance id: it runs once, on the first boot", Sysprep: answerFileAlone, Credentials: credsNoInstanceID}},
		{Name: "users", Set: func(j *job.Job) bool { return len(j.Users) > 0 }, Why: map[string]string{Windows: "they become a cloud-init cloud-config with Linux accounts; give admin_username and admin_password_secret, or a #cloud-config user_data in cloudbase-init's form", Sysprep: answerFileAlone}},
		{Name: "ssh_authorized_keys", Set: func(j *job.Job) bool { return len(j.SSHAuthorizedKeys) > 0 }, Why: map[string]string{Sysprep: answerFileAlone}},
		{Name: "regenerate_ssh_host_keys", Set: func(j *job.Job) bool { return j.RegenerateSSHHostKeys != nil }, Why: map[string]string{Ignition: "Ignition does not manage SSH host keys (the guest's sshd-keygen makes missing ones); give ssh_host_keys to pin them", Sysprep: answerFileAlone, Credentials: "no system credential manages SSH host keys (the guest's sshd makes missing ones)"}},
		{Name: "ssh_password_auth", Set: func(j *job.Job) bool { return j.SSHPasswordAuth != nil }, Why: map[string]string{Ignition: "Ignition has no sshd setting, and where sshd reads drop-ins differs between distributions; write the sshd_config drop-in your image reads with files", Sysprep: answerFileAlone, Credentials: "no system credential sets it; write an sshd_config drop-in with files"}},
		{Name: "dns", Set: func(j *job.Job) bool { return j.DNS != nil }, Why: map[string]string{Ignition: ignNoNetwork, Sysprep: answerFileAlone}},
		{Name: "nics", Set: func(j *job.Job) bool { return len(j.NICs) > 0 }, Why: map[string]string{Ignition: ignNoNetwork, Sysprep: answerFileAlone}},
		{Name: "network_config", Set: func(j *job.Job) bool { return j.NetworkConfig != "" }, Why: map[string]string{Ignition: "it is a cloud-init network-config, which Ignition does not read", Credentials: "it is a cloud-init network-config; describe the network with nics and dns"}},
		{Name: "network_data", Set: func(j *job.Job) bool { return j.NetworkData != nil }, Why: map[string]string{Ignition: "it is OpenStack's network_data.json for cloud-init, which Ignition does not read", Credentials: "it is OpenStack's network_data.json for cloud-init; describe the network with nics and dns"}},
		{Name: "files", Set: func(j *job.Job) bool { return len(j.Files) > 0 }, Why: map[string]string{Windows: "they become cloud-init write_files with Linux owners and modes; give a #cloud-config user_data with cloudbase-init's write_files, or a #ps1_sysnative script", Sysprep: answerFileAlone}},
		{Name: "runcmd", Set: func(j *job.Job) bool { return len(j.Runcmd) > 0 }, Why: map[string]string{Ignition: "Ignition runs no commands (it runs in the initramfs, before the system boots); write a systemd unit with files or in your ignition config", Windows: "they become a cloud-init runcmd; give a #ps1_sysnative or \"rem cmd\" user_data script", Sysprep: answerFileAlone, Credentials: "systemd runs no commands from credentials this agent sets; give a unit as a systemd.extra-unit.* credential (systemd 256 and later)"}},
		{Name: "timezone", Set: func(j *job.Job) bool { return j.Timezone != "" }, Why: map[string]string{Windows: "it becomes a cloud-init cloud-config; give cloudbase-init's set_timezone in a #cloud-config user_data"}},
		{Name: "locale", Set: func(j *job.Job) bool { return j.Locale != "" }, Why: map[string]string{Ignition: "Ignition has no locale setting; write /etc/locale.conf with files", Windows: "it is a Linux locale; cloudbase-init has no locale setting", Sysprep: answerFileAlone}},
		{Name: "ssh_host_keys", Set: func(j *job.Job) bool { return len(j.SSHHostKeys) > 0 }, Why: map[string]string{Windows: "cloudbase-init does not install SSH host keys", Sysprep: answerFileAlone, Credentials: "no system credential installs SSH host keys"}},
		{Name: "regenerate_ssh_host_keys", Set: func(j *job.Job) bool { return j.RegenerateSSHHostKeys != nil }, Why: map[string]string{Windows: "cloudbase-init does not manage SSH host keys"}},
		{Name: "ssh_password_auth", Set: func(j *job.Job) bool { return j.SSHPasswordAuth != nil }, Why: map[string]string{Windows: "it is a cloud-init sshd setting; cloudbase-init has none"}},
		{Name: "power_state", Set: func(j *job.Job) bool { return j.PowerState != nil }, Why: map[string]string{Ignition: "Ignition cannot power off or reboot the guest after provisioning", Windows: "it is a cloud-init module; end a user_data script with shutdown.exe, or set cloudbase-init's allow_reboot", Sysprep: answerFileAlone, Credentials: "no system credential powers the guest off after provisioning"}},
		{Name: "phone_home", Set: func(j *job.Job) bool { return j.PhoneHome != nil }, Why: map[string]string{Ignition: "Ignition reports nothing to a URL when provisioning ends", Windows: "it is a cloud-init module; cloudbase-init has none", Sysprep: answerFileAlone, Credentials: "no system credential reports to a URL"}},
		{Name: "random_seed", Set: func(j *job.Job) bool { return j.RandomSeed != nil }, Why: map[string]string{Ignition: "Ignition has no random seed to hand to the guest", Windows: "cloudbase-init does not read a random seed", Sysprep: answerFileAlone, Credentials: "no system credential carries a random seed"}},
		{Name: "user_data", Set: func(j *job.Job) bool { return j.UserData != "" }, Why: map[string]string{Ignition: "it is cloud-init user-data, which Ignition does not read; give your Ignition config as ignition", Sysprep: answerFileAlone, Credentials: credsNoUserData}},
		{Name: "user_data_base64", Set: func(j *job.Job) bool { return j.UserDataBase64 != "" }, Why: map[string]string{Ignition: "it is cloud-init user-data, which Ignition does not read; give your Ignition config as ignition_base64", Sysprep: answerFileAlone, Credentials: credsNoUserData}},
		{Name: "user_data_secret", Set: func(j *job.Job) bool { return j.UserDataSecret != "" }, Why: map[string]string{Ignition: "it is cloud-init user-data, which Ignition does not read", Sysprep: answerFileAlone, Credentials: credsNoUserData + "; use credential_secrets"}},
		{Name: "user_data_mode", Set: func(j *job.Job) bool { return j.UserDataMode == job.ModeReplace }, Why: map[string]string{Ignition: "there is no cloud-init user-data to replace; a user's ignition config is always merged", Sysprep: answerFileAlone, Credentials: "there is no cloud-init user-data to replace"}},
		{Name: "vendor_data", Set: func(j *job.Job) bool { return j.VendorData != "" }, Why: map[string]string{Ignition: "it is cloud-init vendor-data, which Ignition does not read", Windows: cbiNoVendorData, Sysprep: answerFileAlone, Credentials: credsNoVendorData}},
		{Name: "vendor_data_base64", Set: func(j *job.Job) bool { return j.VendorDataBase64 != "" }, Why: map[string]string{Ignition: "it is cloud-init vendor-data, which Ignition does not read", Windows: cbiNoVendorData, Sysprep: answerFileAlone, Credentials: credsNoVendorData}},
		{Name: "meta_data", Set: func(j *job.Job) bool { return j.MetaData != nil }, Why: map[string]string{Ignition: "Ignition reads no meta-data", Sysprep: answerFileAlone, Credentials: "it is cloud-init meta-data, which a credentials guest does not read"}},
		{Name: "network_config", Set: func(j *job.Job) bool { return j.NetworkConfig != "" }, Why: map[string]string{Sysprep: answerFileAlone}},
		{Name: "network_data", Set: func(j *job.Job) bool { return j.NetworkData != nil }, Why: map[string]string{Sysprep: answerFileAlone}},
		{Name: "guest_report", Set: func(j *job.Job) bool { return j.GuestReport != nil && *j.GuestReport }, Why: map[string]string{Ignition: "the guest report is a cloud-init part, which an Ignition guest does not run", Windows: "the guest report is a cloud-init boothook, which cloudbase-init does not run", Sysprep: answerFileAlone, Credentials: "the guest report is a cloud-init part, which a credentials guest does not run"}},
		{Name: "dns.search", Set: func(j *job.Job) bool { return j.DNS != nil && len(j.DNS.Search) > 0 }, Why: map[string]string{Windows: "cloudbase-init reads no search domains from the payload (it would drop them); set them with a user_data script"}},
		{Name: "prebuilt_image", Set: func(j *job.Job) bool { return j.PrebuiltImage != "" }, Why: map[string]string{Ignition: "a prebuilt Ignition config is not supported yet", Sysprep: answerFileAlone, Credentials: credsNoMedium}},
		// admin_username and admin_certs are cloudbase-init's; the answer
		// file names the administrator itself
		{Name: "admin_username", Set: func(j *job.Job) bool { return j.AdminUsername != "" }, Why: map[string]string{Sysprep: answerFileAlone, Credentials: credsCloudbase}},
		{Name: "admin_certs", Set: func(j *job.Job) bool { return len(j.AdminCerts) > 0 }, Why: map[string]string{Sysprep: answerFileAlone, Credentials: credsCloudbase}},
		// the fields of format "credentials" (issue 42), and those only it
		// refuses
		{Name: "keymap", Set: func(j *job.Job) bool { return j.Keymap != "" }, Only: Credentials},
		{Name: "motd", Set: func(j *job.Job) bool { return j.Motd != "" }, Only: Credentials},
		{Name: "issue", Set: func(j *job.Job) bool { return j.Issue != "" }, Only: Credentials},
		{Name: "credentials", Set: func(j *job.Job) bool { return j.Credentials != nil }, Only: Credentials},
		{Name: "credential_secrets", Set: func(j *job.Job) bool { return j.CredentialSecrets != nil }, Only: Credentials},
		{Name: "credentials_delivery", Set: func(j *job.Job) bool { return j.CredentialsDelivery != "" }, Only: Credentials},
		{Name: "media", Set: func(j *job.Job) bool { return j.Media != "" }, Why: map[string]string{Credentials: credsNoMedium}},
		{Name: "admin_password_secret", Set: func(j *job.Job) bool { return j.AdminPasswordSecret != "" }, Why: map[string]string{Credentials: credsCloudbase}},
	}
}

// who names each refusing kind in its messages.
func who(kind string) string {
	return map[string]string{Ignition: `format "ignition"`, Windows: `guest_os "windows"`, Sysprep: `format "sysprep"`, Credentials: `format "credentials"`}[kind]
}

// Owns reports whether j (defaults applied) is of the one kind that
// takes field name.
func Owns(j *job.Job, name string) bool {
	i := slices.IndexFunc(Fields(), func(f Field) bool { return f.Name == name })
	return i >= 0 && Fields()[i].Only == string(j.Format)
}

// Refuse adds to r, for kind (Ignition, Windows, Sysprep or Credentials), a problem
// for each field of j the kind cannot carry, and, when of is false (j is
// not of that kind), for each field only that kind takes.
func Refuse(j *job.Job, kind string, of bool, r *job.Report) {
	for _, f := range Fields() {
		switch why, ok := f.Why[kind]; {
		case !f.Set(j):
		case !of && f.Only == kind:
			r.Add(f.Name, job.CodeConflict, "%s is only used with %s", f.Name, who(kind))
		case of && ok:
			r.Add(f.Name, job.CodeConflict, "%s cannot carry %s: %s", who(kind), f.Name, why)
		}
	}
}

// Takes reports whether every refusing kind j is of (Ignition for format
// "ignition", Sysprep for "sysprep", Credentials for "credentials",
// Windows for another format with guest_os "windows") takes field name.
func (hooks) Takes(j *job.Job, name string) bool {
	of := map[string]bool{Ignition: j.Format == job.FormatIgnition, Sysprep: j.Format == job.FormatSysprep,
		Windows: j.GuestOS == job.GuestWindows && j.Format != job.FormatSysprep, Credentials: j.Format == job.FormatCredentials}
	for _, f := range Fields() {
		for k := range f.Why {
			if f.Name == name && of[k] {
				return false
			}
		}
	}
	return true
}
