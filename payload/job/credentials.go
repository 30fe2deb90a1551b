package job

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// CredentialsDelivery is how a job of format "credentials" reaches the
// guest (docs/credentials.md).
type CredentialsDelivery string

// Credential deliveries.
const (
	// CredentialsSMBIOS puts each credential in an SMBIOS type 11 OEM
	// string (libvirt's <sysinfo type='smbios'><oemStrings>). libvirt
	// passes them on QEMU's command line, which every host user can read,
	// so secrets are refused.
	CredentialsSMBIOS CredentialsDelivery = "smbios"
	// CredentialsFwCfg puts each credential in a file behind a QEMU
	// fw_cfg entry opt/io.systemd.credentials/NAME.
	CredentialsFwCfg CredentialsDelivery = "fwcfg"
)

// FwCfgCredentialPrefix is the fw_cfg directory systemd (252 and later)
// imports credentials from.
const FwCfgCredentialPrefix = "opt/io.systemd.credentials/"

// CredentialValue is one value of the job's credentials map: text (a JSON
// string) or binary (a JSON object {"base64": "..."}).
type CredentialValue struct {
	Text   string
	Base64 string
	// Binary is true for the {"base64": ...} form.
	Binary bool
}

// Bytes returns the value's bytes; a binary value that is not base64
// gives nil (Validate reports it).
func (v CredentialValue) Bytes() []byte {
	if !v.Binary {
		return []byte(v.Text)
	}
	b, err := base64.StdEncoding.DecodeString(v.Base64)
	if err != nil {
		return nil
	}
	return b
}

// MarshalJSON writes the value back in the shape it was given.
func (v CredentialValue) MarshalJSON() ([]byte, error) {
	if v.Binary {
		return json.Marshal(map[string]string{"base64": v.Base64})
	}
	return json.Marshal(v.Text)
}

// Credentials is the job's credentials map, credential name → value.
type Credentials map[string]CredentialValue

func (c *Credentials) decodeJSON(v any, path string, r *Report) {
	obj, ok := expect[*object](v, path, "an object (credential name → value)", r)
	if !ok {
		return
	}
	m := Credentials{}
	for _, k := range obj.keys {
		p := join(path, k)
		switch t := obj.values[k].(type) {
		case string:
			m[k] = CredentialValue{Text: t}
		case *object:
			if len(t.keys) != 1 || t.keys[0] != "base64" {
				r.Add(p, CodeType, "expected a string (text) or an object {\"base64\": \"...\"} (binary), got an object with keys %s", Quote(strings.Join(t.keys, ", ")))
				continue
			}
			if s, ok := expect[string](t.values["base64"], join(p, "base64"), "a string", r); ok {
				m[k] = CredentialValue{Base64: s, Binary: true}
			}
		default:
			r.Add(p, CodeType, "expected a string (text) or an object {\"base64\": \"...\"} (binary), got %s", describe(t))
		}
	}
	*c = m
}

// CredentialSecrets maps a credential name to the name of the secret
// whose content becomes it.
type CredentialSecrets map[string]string

func (c *CredentialSecrets) decodeJSON(v any, path string, r *Report) {
	obj, ok := expect[*object](v, path, "an object (credential name → secret name)", r)
	if !ok {
		return
	}
	m := CredentialSecrets{}
	for _, k := range obj.keys {
		if s, ok := expect[string](obj.values[k], join(path, k), "a string (a secret name)", r); ok {
			m[k] = s
		}
	}
	*c = m
}
