package cloudinit

import (
	"strings"

	"github.com/vmpayload/vmpayload/payload/job"
)

// CloudConfig is the part of cloud-init's #cloud-config that vmpayload
// generates from a job. Field order is the order of the rendered YAML.
type CloudConfig struct {
	Hostname       string            `yaml:"hostname,omitempty"`
	FQDN           string            `yaml:"fqdn,omitempty"`
	ManageEtcHosts *bool             `yaml:"manage_etc_hosts,omitempty"`
	Timezone       string            `yaml:"timezone,omitempty"`
	Locale         string            `yaml:"locale,omitempty"`
	SSHPwauth      *bool             `yaml:"ssh_pwauth,omitempty"`
	SSHDeletekeys  *bool             `yaml:"ssh_deletekeys,omitempty"`
	SSHKeys        map[string]string `yaml:"ssh_keys,omitempty"`
	RandomSeed     *RandomSeed       `yaml:"random_seed,omitempty"`
	Users          []any             `yaml:"users,omitempty"`
	WriteFiles     []WriteFile       `yaml:"write_files,omitempty"`
	Runcmd         []any             `yaml:"runcmd,omitempty"`
	PhoneHome      *PhoneHome        `yaml:"phone_home,omitempty"`
	PowerState     *PowerState       `yaml:"power_state,omitempty"`
}

// RandomSeed is cloud-config's random_seed (module seed_random).
type RandomSeed struct {
	Encoding string `yaml:"encoding"`
	Data     string `yaml:"data"`
}

// PhoneHome is cloud-config's phone_home.
type PhoneHome struct {
	URL   string `yaml:"url"`
	Post  any    `yaml:"post"`
	Tries int    `yaml:"tries,omitempty"`
}

// PowerState is cloud-config's power_state (module power_state_change).
type PowerState struct {
	Mode      string `yaml:"mode"`
	Delay     any    `yaml:"delay"`
	Message   string `yaml:"message,omitempty"`
	Timeout   int    `yaml:"timeout,omitempty"`
	Condition any    `yaml:"condition,omitempty"`
}

// User is one entry of cloud-config's users list.
type User struct {
	Name       string   `yaml:"name"`
	Groups     []string `yaml:"groups,omitempty"`
	Shell      string   `yaml:"shell,omitempty"`
	Sudo       string   `yaml:"sudo,omitempty"`
	LockPasswd bool     `yaml:"lock_passwd"`
	Passwd     string   `yaml:"passwd,omitempty"`
	// HashedPasswd is used for root: cloud-init hands passwd only to
	// useradd, which it skips for an account that exists.
	HashedPasswd      string   `yaml:"hashed_passwd,omitempty"`
	SSHAuthorizedKeys []string `yaml:"ssh_authorized_keys,omitempty"`
}

// WriteFile is one entry of cloud-config's write_files list.
type WriteFile struct {
	Path        string `yaml:"path"`
	Content     string `yaml:"content"`
	Encoding    string `yaml:"encoding,omitempty"`
	Permissions string `yaml:"permissions,omitempty"`
	Owner       string `yaml:"owner,omitempty"`
	// Defer writes the file in cloud-init's final stage, after users exist,
	// so that an owner created by the same job can be applied.
	Defer bool `yaml:"defer,omitempty"`
}

// IsEmpty reports whether the config sets nothing.
func (c *CloudConfig) IsEmpty() bool {
	return c.Hostname == "" && c.FQDN == "" && c.ManageEtcHosts == nil && c.Timezone == "" &&
		c.SSHPwauth == nil && c.SSHDeletekeys == nil && len(c.Users) == 0 && len(c.WriteFiles) == 0 && len(c.Runcmd) == 0 &&
		c.Locale == "" && len(c.SSHKeys) == 0 && c.RandomSeed == nil && c.PhoneHome == nil && c.PowerState == nil
}

func ptr[T any](v T) *T { return &v }

// buildCloudConfig turns the job's fields into the generated cloud-config.
// hashes holds the crypt hash for each user (by index), "" for none; keys
// the resolved host keys (by index of ssh_host_keys); seed the base64
// random seed ("" for none).
func buildCloudConfig(j *job.Job, hashes []string, keys []HostKey, seed string) *CloudConfig {
	c := &CloudConfig{}
	if j.Hostname != "" {
		h := strings.TrimSuffix(j.Hostname, ".")
		short, _, isFQDN := strings.Cut(h, ".")
		c.Hostname = short
		if isFQDN {
			c.FQDN = h
		}
		// manage_etc_hosts maps the name to 127.0.1.1 so `hostname -f` answers
		// without DNS; the default leaves /etc/hosts without it.
		c.ManageEtcHosts = ptr(true)
	}
	c.Timezone = j.Timezone
	c.SSHPwauth = j.SSHPasswordAuth
	c.SSHDeletekeys = j.RegenerateSSHHostKeys
	if len(j.Users) > 0 {
		// "default" keeps the image's default user (and the keys from
		// meta-data that cloud-init gives it) next to the job's users.
		c.Users = append(c.Users, "default")
		for i, u := range j.Users {
			cu := User{
				Name:              u.Name,
				Groups:            u.Groups,
				Shell:             u.Shell,
				Sudo:              u.Sudo,
				SSHAuthorizedKeys: u.SSHAuthorizedKeys,
				Passwd:            hashes[i],
			}
			// cloud-init locks the password unless told otherwise; a job that
			// gives a password means it to work, one that does not keeps the lock.
			cu.LockPasswd = cu.Passwd == ""
			if u.Name == "root" {
				// root exists: never lock it as a side effect, and set its
				// password the way cloud-init does for existing accounts.
				cu.Passwd, cu.HashedPasswd, cu.LockPasswd = "", hashes[i], false
			}
			if u.LockPassword != nil {
				cu.LockPasswd = *u.LockPassword
			}
			c.Users = append(c.Users, cu)
		}
	}
	for _, f := range j.Files {
		wf := WriteFile{Path: f.Path, Content: f.Content, Owner: f.Owner}
		if f.Encoding == job.EncodingBase64 {
			wf.Encoding = "b64"
		}
		if f.Permissions != "" {
			wf.Permissions = "0" + strings.TrimLeft(f.Permissions, "0")
			if len(wf.Permissions) < 4 {
				wf.Permissions = strings.Repeat("0", 4-len(wf.Permissions)) + wf.Permissions
			}
		}
		if f.Owner != "" && f.Owner != "root:root" {
			wf.Defer = true
		}
		c.WriteFiles = append(c.WriteFiles, wf)
	}
	for _, cmd := range j.Runcmd {
		c.Runcmd = append(c.Runcmd, commandValue(cmd))
	}
	c.Locale = j.Locale
	if len(keys) > 0 {
		c.SSHKeys = map[string]string{}
		for _, k := range keys {
			c.SSHKeys[k.Type+"_private"] = k.Private
			c.SSHKeys[k.Type+"_public"] = k.Public
		}
		// the image may keep its keys (ssh_deletekeys: false in its
		// cloud.cfg); the guest must have exactly the given ones
		c.SSHDeletekeys = ptr(true)
	}
	if seed != "" && !job.KindTraits(j).OpenStack {
		c.RandomSeed = &RandomSeed{Encoding: "b64", Data: seed}
	}
	if ph := j.PhoneHome; ph != nil {
		c.PhoneHome = &PhoneHome{URL: ph.URL, Post: "all", Tries: ph.Tries}
		if len(ph.Post) > 0 {
			c.PhoneHome.Post = ph.Post
		}
	}
	if ps := j.PowerState; ps != nil {
		c.PowerState = &PowerState{Mode: ps.Mode, Delay: "now", Message: ps.Message, Timeout: ps.TimeoutSeconds}
		if ps.DelayMinutes > 0 {
			c.PowerState.Delay = ps.DelayMinutes
		}
		if ps.Condition != nil {
			c.PowerState.Condition = commandValue(*ps.Condition)
		}
	}
	return c
}

func commandValue(cmd job.Command) any {
	if cmd.IsArgv() {
		return cmd.Argv
	}
	return cmd.Shell
}
