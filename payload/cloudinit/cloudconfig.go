package cloudinit

import (
	"strings"

	"github.com/vmpayload/vmpayload/payload/job"
)

// CloudConfig is the part of cloud-init's #cloud-config that vmpayload
// generates from a job. Field order is the order of the rendered YAML.
type CloudConfig struct {
	Hostname       string      `yaml:"hostname,omitempty"`
	FQDN           string      `yaml:"fqdn,omitempty"`
	ManageEtcHosts *bool       `yaml:"manage_etc_hosts,omitempty"`
	Timezone       string      `yaml:"timezone,omitempty"`
	SSHPwauth      *bool       `yaml:"ssh_pwauth,omitempty"`
	SSHDeletekeys  *bool       `yaml:"ssh_deletekeys,omitempty"`
	Users          []any       `yaml:"users,omitempty"`
	WriteFiles     []WriteFile `yaml:"write_files,omitempty"`
	Runcmd         []any       `yaml:"runcmd,omitempty"`
}

// User is one entry of cloud-config's users list.
type User struct {
	Name              string   `yaml:"name"`
	Groups            []string `yaml:"groups,omitempty"`
	Shell             string   `yaml:"shell,omitempty"`
	Sudo              string   `yaml:"sudo,omitempty"`
	LockPasswd        bool     `yaml:"lock_passwd"`
	Passwd            string   `yaml:"passwd,omitempty"`
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
		c.SSHPwauth == nil && c.SSHDeletekeys == nil && len(c.Users) == 0 && len(c.WriteFiles) == 0 && len(c.Runcmd) == 0
}

func ptr[T any](v T) *T { return &v }

// buildCloudConfig turns the job's fields into the generated cloud-config.
// hashes holds the crypt hash for each user (by index), "" for none.
func buildCloudConfig(j *job.Job, hashes []string) *CloudConfig {
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
		if cmd.IsArgv() {
			c.Runcmd = append(c.Runcmd, cmd.Argv)
		} else {
			c.Runcmd = append(c.Runcmd, cmd.Shell)
		}
	}
	return c
}
