package job

import (
	"fmt"
	"maps"
	"slices"
)

// SecretRef is one secret a job names: the field's full path (as in
// FieldError.Field, e.g. "ssh_host_keys[0].private_key_secret") and the
// secret's name as the job gives it.
type SecretRef struct {
	Field string
	Name  string
}

// SecretRefs lists every secret j names, one entry for each *_secret field
// that is set, in field order. It is the one list of the job's secret
// references: whoever decides who may use a secret (the agent's access
// policy) reads it, so a *_secret field added to the job format belongs here
// (TestSecretRefsCoversEverySecretField fails until it is).
func (j *Job) SecretRefs() []SecretRef {
	var refs []SecretRef
	add := func(field, name string) {
		if name != "" {
			refs = append(refs, SecretRef{Field: field, Name: name})
		}
	}
	for i, u := range j.Users {
		add(fmt.Sprintf("users[%d].password_secret", i), u.PasswordSecret)
	}
	for i, k := range j.SSHHostKeys {
		add(fmt.Sprintf("ssh_host_keys[%d].private_key_secret", i), k.PrivateKeySecret)
	}
	add("user_data_secret", j.UserDataSecret)
	add("admin_password_secret", j.AdminPasswordSecret)
	add("sysprep_secret", j.SysprepSecret)
	add("domain_admin_password_secret", j.DomainAdminPasswordSecret)
	add("product_key_secret", j.ProductKeySecret)
	for _, k := range slices.Sorted(maps.Keys(j.CredentialSecrets)) {
		add("credential_secrets."+k, j.CredentialSecrets[k])
	}
	return refs
}
