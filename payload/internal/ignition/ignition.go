// Package ignition renders the Ignition config of a job of format
// "ignition": the job's fields (hostname, timezone, users, files, SSH
// host keys) as an Ignition config built from Ignition's own types
// (github.com/coreos/ignition/v2, spec 3.0.0), and the user's own config,
// when the job has one, referenced from it in ignition.config.merge as a
// data: URL, so that the guest's Ignition applies the merge itself. The
// user's config is the merge child: on a conflict (the same file path, the
// same user's scalar field) it wins, as the user's user-data wins in
// cloud-init's merge mode. docs/ignition.md describes the mapping.
package ignition

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/coreos/go-semver/semver"
	ignutil "github.com/coreos/ignition/v2/config/util"
	v30 "github.com/coreos/ignition/v2/config/v3_0/types"
	tr31 "github.com/coreos/ignition/v2/config/v3_1/translate"
	tr32 "github.com/coreos/ignition/v2/config/v3_2/translate"
	tr33 "github.com/coreos/ignition/v2/config/v3_3/translate"
	tr34 "github.com/coreos/ignition/v2/config/v3_4/translate"
	tr35 "github.com/coreos/ignition/v2/config/v3_5/translate"
	tr36 "github.com/coreos/ignition/v2/config/v3_6/translate"

	"github.com/vmpayload/vmpayload/payload/job"
)

// DefaultUser is the account the job's top-level ssh_authorized_keys go
// to: the default user of Fedora CoreOS, RHCOS and Flatcar.
const DefaultUser = "core"

// HostKey is an SSH host key pair, as payload.Check resolved it.
type HostKey struct {
	// Type is ed25519, ecdsa or rsa.
	Type string
	// Private is the private key text; Public the public key line.
	Private, Public string
}

// Input is what Render turns into a config: a checked job (defaults
// applied) and the values resolved for it.
type Input struct {
	Job job.Job
	// PasswordHashes holds, per entry of Job.Users, the crypt(3) hash of
	// its password ("" for none): the given password_hash, or the SHA-512
	// crypt the cloud-init path makes of a plaintext password.
	PasswordHashes []string
	// HostKeys holds, per entry of Job.SSHHostKeys, the resolved pair.
	HostKeys []HostKey
}

// GeneratedSpec is the spec of the config generated from the job's
// fields: the lowest stable spec, 3.0.0, carries all of them (files with
// mode, owner and data: URL contents, links, users with password hash, SSH
// keys, groups and shell, and ignition.config.merge).
var GeneratedSpec = semver.Version{Major: 3, Minor: 0}

// Render returns the job's Ignition config (JSON) and its spec version:
// GeneratedSpec, or the spec of the user's config when that is higher, so
// that a guest whose Ignition can read the top-level config can also read
// the config it merges (Ignition itself parses each merged config on its
// own, any supported spec).
func Render(in Input) ([]byte, semver.Version, error) {
	c := Generate(in)
	spec := GeneratedSpec
	user, _, err := job.IgnitionUserConfig(&in.Job)
	if err != nil {
		return nil, spec, fmt.Errorf("rendering the Ignition config: %w", err)
	}
	if user != nil {
		v, _, err := ignutil.GetConfigVersion(user)
		if err != nil {
			return nil, spec, fmt.Errorf("rendering the Ignition config: reading the version of the user's config: %w", err)
		}
		if spec.LessThan(v) {
			spec = v
		}
		src := DataURL(user)
		sum := sha512.Sum512(user)
		hash := "sha512-" + hex.EncodeToString(sum[:])
		c.Ignition.Config.Merge = append(c.Ignition.Config.Merge, v30.ConfigReference{Source: &src, Verification: v30.Verification{Hash: &hash}})
	}
	b, err := marshalSpec(c, spec)
	if err == nil {
		b, err = compact(b)
	}
	if err != nil {
		return nil, spec, fmt.Errorf("rendering the Ignition config: %w", err)
	}
	return b, spec, nil
}

// compact drops the nulls and empty objects from the JSON text b:
// encoding/json's omitempty keeps a struct that is not set ("group": {},
// "replace": {"source": null}), and Ignition decodes a missing key, null
// and {} alike.
func compact(b []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	v, _ = prune(v)
	return json.Marshal(v)
}

// prune returns v without nulls and empty objects, and whether anything
// is left of it.
func prune(v any) (any, bool) {
	switch t := v.(type) {
	case nil:
		return nil, false
	case map[string]any:
		for k, e := range t {
			if p, ok := prune(e); ok {
				t[k] = p
			} else {
				delete(t, k)
			}
		}
		return t, len(t) > 0
	case []any:
		for i, e := range t {
			t[i], _ = prune(e)
		}
		return t, true
	}
	return v, true
}

// marshalSpec encodes c, a spec 3.0.0 config, at spec v (3.0.0-3.6.0),
// translating it up with Ignition's own translators; Render then drops the
// empty objects and nulls Ignition's types encode for fields not set
// (compact).
func marshalSpec(c v30.Config, v semver.Version) ([]byte, error) {
	if v.Major != 3 || v.Minor > 6 || v.PreRelease != "" {
		return nil, fmt.Errorf("spec %s is not a stable spec from 3.0.0 to 3.6.0", v)
	}
	c1 := tr31.Translate(c)
	c2 := tr32.Translate(c1)
	c3 := tr33.Translate(c2)
	c4 := tr34.Translate(c3)
	c5 := tr35.Translate(c4)
	return json.Marshal([]any{c, c1, c2, c3, c4, c5, tr36.Translate(c5)}[v.Minor])
}

// DataURL is the RFC 2397 data: URL of b, base64-encoded.
func DataURL(b []byte) string {
	return "data:;base64," + base64.StdEncoding.EncodeToString(b)
}

// Generate returns the config of the job's own fields, spec 3.0.0, without
// the user's config.
func Generate(in Input) v30.Config {
	j := in.Job
	c := v30.Config{Ignition: v30.Ignition{Version: GeneratedSpec.String()}}
	if j.Hostname != "" {
		c.Storage.Files = append(c.Storage.Files, file(job.IgnitionHostnamePath, []byte(strings.TrimSuffix(j.Hostname, ".")+"\n"), ptr(0o644), "", ""))
	}
	if j.Timezone != "" {
		c.Storage.Links = append(c.Storage.Links, v30.Link{
			Node:          v30.Node{Path: job.IgnitionLocaltimePath, Overwrite: ptr(true)},
			LinkEmbedded1: v30.LinkEmbedded1{Target: job.IgnitionZoneinfoDir + j.Timezone},
		})
	}
	defaultUser := -1
	for i, u := range j.Users {
		pu := v30.PasswdUser{Name: u.Name}
		if i < len(in.PasswordHashes) && in.PasswordHashes[i] != "" {
			pu.PasswordHash = ptr(in.PasswordHashes[i])
		}
		for _, k := range u.SSHAuthorizedKeys {
			pu.SSHAuthorizedKeys = append(pu.SSHAuthorizedKeys, v30.SSHAuthorizedKey(k))
		}
		for _, g := range u.Groups {
			pu.Groups = append(pu.Groups, v30.Group(g))
		}
		if u.Shell != "" {
			pu.Shell = ptr(u.Shell)
		}
		if u.Name == DefaultUser {
			defaultUser = len(c.Passwd.Users)
		}
		c.Passwd.Users = append(c.Passwd.Users, pu)
		if u.Sudo != "" {
			c.Storage.Files = append(c.Storage.Files, file(job.IgnitionSudoersPath(u.Name), []byte(u.Name+" "+u.Sudo+"\n"), ptr(0o440), "root", "root"))
		}
	}
	if len(j.SSHAuthorizedKeys) > 0 {
		if defaultUser < 0 {
			defaultUser = len(c.Passwd.Users)
			c.Passwd.Users = append(c.Passwd.Users, v30.PasswdUser{Name: DefaultUser})
		}
		pu := &c.Passwd.Users[defaultUser]
		seen := map[v30.SSHAuthorizedKey]bool{}
		for _, k := range pu.SSHAuthorizedKeys {
			seen[k] = true
		}
		for _, k := range j.SSHAuthorizedKeys {
			if !seen[v30.SSHAuthorizedKey(k)] {
				pu.SSHAuthorizedKeys = append(pu.SSHAuthorizedKeys, v30.SSHAuthorizedKey(k))
				seen[v30.SSHAuthorizedKey(k)] = true
			}
		}
	}
	for _, f := range j.Files {
		data := []byte(f.Content)
		if f.Encoding == job.EncodingBase64 {
			data, _ = base64.StdEncoding.DecodeString(f.Content) // checked by Validate
		}
		var mode *int
		if f.Permissions != "" {
			m, _ := strconv.ParseInt(f.Permissions, 8, 32) // checked by Validate
			mode = ptr(int(m))
		}
		owner, group, _ := strings.Cut(f.Owner, ":")
		c.Storage.Files = append(c.Storage.Files, file(f.Path, data, mode, owner, group))
	}
	for _, k := range in.HostKeys {
		priv, pub := job.IgnitionHostKeyPaths(k.Type)
		c.Storage.Files = append(c.Storage.Files,
			file(priv, []byte(k.Private), ptr(0o600), "root", "root"),
			file(pub, []byte(strings.TrimSpace(k.Public)+"\n"), ptr(0o644), "root", "root"))
	}
	return c
}

// file is a storage.files entry that replaces whatever is at path (as
// cloud-init's write_files does), with contents data.
func file(path string, data []byte, mode *int, owner, group string) v30.File {
	f := v30.File{
		Node:          v30.Node{Path: path, Overwrite: ptr(true)},
		FileEmbedded1: v30.FileEmbedded1{Contents: v30.FileContents{Source: ptr(DataURL(data))}, Mode: mode},
	}
	if owner != "" {
		f.User.Name = ptr(owner)
	}
	if group != "" {
		f.Group.Name = ptr(group)
	}
	return f
}

func ptr[T any](v T) *T { return &v }
