// Package cloudinit renders the cloud-init documents of a job: NoCloud
// (meta-data, user-data, network-config, vendor-data) or OpenStack
// config-drive v2 (openstack/latest/...). Every document is built from typed
// structs and serialised with a YAML or JSON encoder; nothing is rendered
// from text templates (go.yaml.in/yaml/v3 and encoding/json). Big
// write_files contents are spliced in as base64 after the encoder has run
// (bigfiles.go).
package cloudinit

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/go-crypt/crypt/algorithm/shacrypt"
	"go.yaml.in/yaml/v3"

	"github.com/vmpayload/vmpayload/payload/job"
)

// Input is a job payload.Check found nothing wrong with, its defaults
// applied and its indirect values resolved. Render trusts it: the package
// is internal to payload so that no other path can build one.
type Input struct {
	// Job is the job, with defaults applied (job.Job.Apply).
	Job job.Job
	// UserData is the user's raw user-data, taken from user_data,
	// user_data_base64 or user_data_secret; "" when the job has none.
	UserData string
	// Passwords holds, per entry of Job.Users, the plaintext password
	// read from its password_secret; "" where there is none (a plain
	// password field counts too).
	Passwords []string
	// HostKeys holds, per entry of Job.SSHHostKeys, the key pair parsed
	// from its private_key_secret.
	HostKeys []HostKey
	// Sysprep is the answer file of a job of format "sysprep" (from
	// sysprep, sysprep_base64 or sysprep_secret).
	Sysprep string
	// AdminPassword is the plaintext read from Job.AdminPasswordSecret:
	// cloudbase-init sets the administrator's password from meta_data.json
	// admin_pass (guest_os "windows", format "configdrive"), and a sysprep
	// answer file carries it as its {{admin_password}}, so it reaches the
	// image as it is. It enters the content hash only as a fixed-salt
	// SHA-512 crypt.
	AdminPassword string
	// DomainAdminPassword and ProductKey are the plaintexts read from
	// Job.DomainAdminPasswordSecret and Job.ProductKeySecret (format
	// "sysprep"): like AdminPassword they reach the image only and enter
	// the content hash as fixed-salt SHA-512 crypts.
	DomainAdminPassword, ProductKey string
	// Identity, when set, pins the content hash and instance-id to those an
	// earlier render of the same job recorded (see package recipe): a
	// recipe stores a plaintext password only as the hash that went into
	// the image, from which the identities of the original job cannot be
	// derived again. nil derives them from the job as usual.
	Identity *Identity
}

// Identity is the pair of identities a render derives from a job.
type Identity struct {
	// ContentHash is Documents.ContentHash (64 hex digits).
	ContentHash string
	// InstanceID is Documents.InstanceID.
	InstanceID string
}

// Options tune rendering.
type Options struct {
	// Salt returns the salt for one password hash. nil means the
	// deterministic salt of DeterministicSalt; tests set it to get output
	// that does not depend on the password.
	Salt func() (string, error)
	// Rand is the source of a random_seed with generate_bytes; nil means
	// crypto/rand.
	Rand io.Reader
}

// File is one rendered document and its path inside the image.
type File struct {
	Path string
	Data []byte
}

// Documents is the rendered payload content.
type Documents struct {
	Format job.Format
	// InstanceID is the instance-id the guest sees (meta-data instance-id,
	// config-2 uuid).
	InstanceID string
	// ContentHash identifies the content (hex SHA-256 of the job's content
	// fields, format and media); equal jobs give equal hashes even though
	// password salts differ, so it can name the image file.
	ContentHash string
	// Files are the documents, in a stable order.
	Files []File
	// PasswordHashes holds, per entry of the job's users, the crypt(3)
	// hash that went into the user-data (the given password_hash, or the
	// SHA-512 crypt of password / password_secret); "" for a user without
	// a password.
	PasswordHashes []string
	// RandomSeed is the base64 random seed that went into the image (the
	// job's random_seed.data, or the bytes generated for
	// random_seed.generate_bytes); "" without random_seed. A generated
	// seed differs on every render, so an existing image of the same
	// content hash holds another one.
	RandomSeed string
	// HostKeyPublics holds, per entry of the job's ssh_host_keys, the
	// public key line that went into the image.
	HostKeyPublics []string
	// IgnitionSpec is the spec version of the Ignition config of a job
	// of format "ignition" ("" for cloud-init documents).
	IgnitionSpec string
}

// Size is the total number of content bytes.
func (d *Documents) Size() int {
	n := 0
	for _, f := range d.Files {
		n += len(f.Data)
	}
	return n
}

// Render builds the documents for in, which payload.Check has checked:
// it does not validate the job again. Its only refusal of content is
// documents that add up to more than the image limit (a
// *job.ValidationError), which only the rendered size can tell.
func Render(in Input, opt Options) (*Documents, error) {
	j := in.Job
	keys := in.HostKeys
	seed, err := randomSeed(&j, opt.Rand)
	if err != nil {
		return nil, err
	}
	// in.Passwords carries resolved secrets; plain password fields count too.
	plain := make([]string, len(j.Users))
	for i, u := range j.Users {
		plain[i] = u.Password
		if i < len(in.Passwords) && in.Passwords[i] != "" {
			plain[i] = in.Passwords[i]
		}
	}
	in.Passwords = plain

	if in.Identity != nil && (!validContentHash(in.Identity.ContentHash) || in.Identity.InstanceID == "") {
		return nil, fmt.Errorf("rendering: the pinned identity needs a 64-digit hex content hash and an instance-id")
	}
	contentSum, iidHash, err := jobIdentities(&j, in, keys)
	if err != nil {
		return nil, err
	}
	if in.Identity != nil {
		contentSum = in.Identity.ContentHash
	}
	passwordHashes := func() ([]string, error) {
		hashes := make([]string, len(j.Users))
		for i, u := range j.Users {
			switch {
			case u.PasswordHash != "":
				hashes[i] = u.PasswordHash
			case i < len(in.Passwords) && in.Passwords[i] != "":
				salt := opt.Salt
				if salt == nil {
					salt = func() (string, error) { return DeterministicSalt(in.Passwords[i], u.Name, j.Hostname), nil }
				}
				h, err := hashPassword(in.Passwords[i], salt)
				if err != nil {
					return nil, fmt.Errorf("hashing the password of users[%d]: %w", i, err)
				}
				hashes[i] = h
			}
		}
		return hashes, nil
	}
	if render := renderers[j.Format]; render != nil {
		// a kind that writes no cloud-init documents (Ignition, sysprep)
		iid := uuidFromHash(iidHash)
		if in.Identity != nil {
			iid = in.Identity.InstanceID
		}
		return render(&j, in, Derived{InstanceID: iid, ContentHash: contentSum, PasswordHashes: passwordHashes})
	}
	j.MetaData = job.MetaDataFor(j.Format, j.MetaData)
	hashes, err := passwordHashes()
	if err != nil {
		return nil, err
	}
	cc := &CloudConfig{}
	if !j.IsWindows() {
		// cloudbase-init reads no generated cloud-config: a Windows job's
		// fields go to meta-data and network data only (payload/kinds/cloudbase
		// refuses the others)
		cc = buildCloudConfig(&j, hashes, keys, seed)
	}
	key, err := placeholderKey()
	if err != nil {
		return nil, err
	}
	big := detachBigContents(cc, key)
	var userData []byte
	if j.IsWindows() {
		// verbatim in either mode (cloudbase-init undoes gzip itself); no
		// user-data, no config-2 document
		userData = []byte(in.UserData)
	} else if userData, err = assembleUserData(cc, big, in.UserData, j.UserDataMode, contentSum); err != nil {
		return nil, err
	}
	iid := j.InstanceID
	if iid == "" {
		iid = uuidFromHash(iidHash)
	}
	if v, ok := j.MetaData[metaInstanceKey(&j)].(string); ok && v != "" {
		iid = v
	}
	if in.Identity != nil {
		iid = in.Identity.InstanceID
	}
	if j.GuestReport != nil && *j.GuestReport {
		if userData, err = addReporter(&j, in.UserData, userData, contentSum); err != nil {
			return nil, err
		}
	}

	docs := &Documents{Format: j.Format, InstanceID: iid, ContentHash: contentSum, PasswordHashes: hashes, RandomSeed: seed}
	for _, k := range keys {
		docs.HostKeyPublics = append(docs.HostKeyPublics, k.Public)
	}
	if job.KindTraits(&j).OpenStack {
		err = renderConfigDrive(docs, &j, userData, seed, in.AdminPassword)
	} else {
		err = renderNoCloud(docs, &j, userData)
	}
	if err != nil {
		return nil, err
	}
	if n := docs.Size(); n > job.MaxContentBytes {
		return nil, (&job.Report{Errors: []job.FieldError{{Code: job.CodeTooLarge,
			Message: fmt.Sprintf("the rendered documents add up to %d bytes; the image limit is %d", n, job.MaxContentBytes)}}}).Err()
	}
	return docs, nil
}

// randomSeed returns the job's random seed in base64: the given data, or
// generate_bytes bytes read from src (crypto/rand when nil).
func randomSeed(j *job.Job, src io.Reader) (string, error) {
	rs := j.RandomSeed
	switch {
	case rs == nil:
		return "", nil
	case rs.Data != "":
		return rs.Data, nil
	}
	if src == nil {
		src = rand.Reader
	}
	b := make([]byte, rs.GenerateBytes)
	if _, err := io.ReadFull(src, b); err != nil {
		return "", fmt.Errorf("generating the random seed: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func metaInstanceKey(j *job.Job) string {
	if job.KindTraits(j).OpenStack {
		return "uuid"
	}
	return "instance-id"
}

// jobIdentities returns the content hash (everything of j that reaches the
// image) and the instance hash (the same without format, media and pinned
// ids). Plaintext passwords enter them only as a salted SHA-512 crypt with a
// fixed salt, no weaker than the hash the image itself carries.
func jobIdentities(j *job.Job, in Input, keys []HostKey) (content, instance string, err error) {
	c := *j
	// a host key enters as its public half (which names the private one)
	c.SSHHostKeys = make([]job.SSHHostKey, len(j.SSHHostKeys))
	for i, k := range j.SSHHostKeys {
		if i < len(keys) {
			k.PublicKey = keys[i].Public
		}
		c.SSHHostKeys[i] = k
	}
	c.ID, c.Domain, c.Action, c.DomainXML, c.PrebuiltImage = "", "", "", "", ""
	if c.GuestReport != nil && !*c.GuestReport {
		c.GuestReport = nil // off is the same content as absent
	}
	c.UserData, c.UserDataBase64, c.UserDataSecret = in.UserData, "", ""
	// plaintexts enter as a crypt hash with a fixed salt, like a user's
	// password; a secret's answer file may hold passwords, so it enters
	// the (public) content hash that way too, not as text
	var herr error
	derive := func(plain string) string {
		h, err := hashPassword(plain, func() (string, error) { return "vmpayload.iid", nil })
		herr = cmp.Or(herr, err)
		return "derived:" + h
	}
	c.Users = slices.Clone(j.Users)
	for i := range c.Users {
		if i < len(in.Passwords) && in.Passwords[i] != "" {
			u := &c.Users[i]
			u.Password, u.PasswordSecret, u.PasswordHash = "", "", derive(in.Passwords[i])
		}
	}
	if job.KindTraits(j).AnswerFile {
		// the answer file enters as its text
		c.Sysprep, c.SysprepBase64, c.SysprepSecret = in.Sysprep, "", ""
		if j.SysprepSecret != "" {
			c.Sysprep = derive(in.Sysprep)
		}
	}
	// the administrator password (configdrive or sysprep) and the other
	// Windows secrets
	for _, sv := range []struct {
		plain string
		field *string
	}{{in.AdminPassword, &c.AdminPasswordSecret}, {in.DomainAdminPassword, &c.DomainAdminPasswordSecret}, {in.ProductKey, &c.ProductKeySecret}} {
		if sv.plain != "" {
			*sv.field = derive(sv.plain)
		}
	}
	if herr != nil {
		return "", "", fmt.Errorf("deriving the content hash: %w", herr)
	}
	// the instance hash leaves out what does not make a new instance
	ci := c
	ci.Format, ci.Media, ci.InstanceID = "", "", ""
	ci.GuestReport = nil // turning the report on or off is no new instance
	if content, err = jobHash(c); err != nil {
		return "", "", err
	}
	if instance, err = jobHash(ci); err != nil {
		return "", "", err
	}
	return content, instance, nil
}

// jobHash returns the hex SHA-256 of json.Marshal(j): the content and
// instance hashes. Their bytes are a format (recipes record them, and the
// instance-id derives from one), so they stay json.Marshal's, HTML-safe
// escaping included.
func jobHash(j job.Job) (string, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return "", fmt.Errorf("deriving the content hash: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// uuidFromHash shapes the first 16 bytes of a hex hash as an RFC 9562
// version 8 (custom) UUID, so config-2 consumers that expect a UUID get one.
func uuidFromHash(h string) string {
	b, _ := hex.DecodeString(h[:32])
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b)
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

func validContentHash(h string) bool {
	_, err := hex.DecodeString(h)
	return err == nil && len(h) == 64
}

const saltAlphabet = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// saltLabel versions the salt derivation: changing it changes every derived
// password hash, and with it the image bytes of every job with a plaintext
// password (not their content hash or instance-id, see jobIdentities).
const saltLabel = "vmpayload/password-salt/v1"

// DeterministicSalt returns the SHA-512 crypt salt used for the plaintext
// password plain of user on host: 16 characters of crypt's alphabet taken
// from HMAC-SHA256(key = plain, message = label, user, host, each followed
// by a NUL byte). The same job therefore renders byte-identical documents
// on every build, which a rebuild from a recipe needs, while the same
// password for another user or on another host gets another salt. The
// trade-off against a random salt: two hashes of the same password are
// recognisable as equal when user and host are the same too (a rebuild of
// the same job), and never otherwise; an attacker learns nothing new about
// the password itself, since the salt is a keyed hash of it.
func DeterministicSalt(plain, user, host string) string {
	m := hmac.New(sha256.New, []byte(plain))
	for _, s := range []string{saltLabel, user, host} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	sum := m.Sum(nil)
	b := make([]byte, 16)
	for i := range b {
		b[i] = saltAlphabet[int(sum[i])%len(saltAlphabet)] // 64 symbols: no bias
	}
	return string(b)
}

// hashPassword returns the SHA-512 crypt ("$6$salt$hash", 5000 rounds, the
// form `openssl passwd -6` and `mkpasswd -m sha-512` produce) of plain with
// the salt that salt returns.
func hashPassword(plain string, salt func() (string, error)) (string, error) {
	s, err := salt()
	if err != nil {
		return "", err
	}
	h, err := shacrypt.New(shacrypt.WithVariant(shacrypt.VariantSHA512), shacrypt.WithIterations(shacrypt.IterationsDefaultOmitted))
	if err != nil {
		return "", fmt.Errorf("setting up SHA-512 crypt: %w", err)
	}
	d, err := h.HashWithSalt(plain, []byte(s))
	if err != nil {
		return "", fmt.Errorf("computing SHA-512 crypt: %w", err)
	}
	return d.Encode(), nil
}

// marshalYAML encodes v with go-yaml, two-space indentation.
func marshalYAML(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return buf.Bytes(), nil
}

// cloudConfigDoc is the generated cloud-config document: the header line
// and cc as go-yaml encodes it (nothing after the header when cc is empty).
func cloudConfigDoc(cc *CloudConfig) ([]byte, error) {
	b, err := marshalYAML(cc)
	if err != nil {
		return nil, fmt.Errorf("rendering cloud-config: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(b), []byte("{}")) {
		b = nil
	}
	return append([]byte("#cloud-config\n"), b...), nil
}

// assembleUserData combines the generated cloud-config with the user's
// user-data according to mode. big holds the contents detachBigContents
// took out of cc; contentHash names the MIME boundary when the two are
// merged.
func assembleUserData(cc *CloudConfig, big *bigContents, user string, mode job.UserDataMode, contentHash string) ([]byte, error) {
	if user == "" {
		return generatedDoc(cc, big)
	}
	if mode == job.ModeReplace {
		return []byte(user), nil
	}
	text, err := job.UserDataText(user)
	if err != nil {
		return nil, fmt.Errorf("merging user_data: %w", err)
	}
	if cc.IsEmpty() {
		return []byte(text), nil
	}
	gen, err := generatedDoc(cc, big)
	if err != nil {
		return nil, err
	}
	return mergeUserData(text, "vmpayload-"+contentHash[:24], generatedPart(gen, "vmpayload.cfg"))
}

// generatedDoc is the generated cloud-config document with the contents
// detached by detachBigContents put back. It is spliced before it becomes a
// MIME part, whose transfer encoding may hide the placeholders.
func generatedDoc(cc *CloudConfig, big *bigContents) ([]byte, error) {
	doc, err := cloudConfigDoc(cc)
	if err != nil {
		return nil, err
	}
	return big.splice(doc)
}

// placeholderKey returns the key that makes detachBigContents'
// placeholders unique: 64 hex digits of fresh randomness, so that no input
// can spell a placeholder. No placeholder reaches the output.
func placeholderKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("rendering: drawing the placeholder key: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func renderNoCloud(d *Documents, j *job.Job, userData []byte) error {
	meta := map[string]any{"instance-id": d.InstanceID}
	if j.Hostname != "" {
		meta["local-hostname"] = j.Hostname
	}
	if len(j.SSHAuthorizedKeys) > 0 {
		keys := make([]any, len(j.SSHAuthorizedKeys))
		for i, k := range j.SSHAuthorizedKeys {
			keys[i] = k
		}
		meta["public-keys"] = keys
	}
	for k, v := range j.MetaData {
		meta[k] = v
	}
	md, err := marshalYAML(meta)
	if err != nil {
		return fmt.Errorf("rendering meta-data: %w", err)
	}
	d.Files = append(d.Files, File{"meta-data", md}, File{"user-data", userData})
	if nc := buildNetworkV1(j); nc != nil {
		b, err := marshalYAML(nc)
		if err != nil {
			return fmt.Errorf("rendering network-config: %w", err)
		}
		d.Files = append(d.Files, File{"network-config", b})
	} else if j.NetworkConfig != "" {
		nc, err := job.NetworkConfigText(j.NetworkConfig)
		if err != nil {
			return fmt.Errorf("rendering network-config: %w", err)
		}
		d.Files = append(d.Files, File{"network-config", []byte(nc)})
	}
	if vd := j.VendorDataRaw(); vd != "" {
		d.Files = append(d.Files, File{"vendor-data", []byte(vd)})
	}
	return nil
}

// OpenStackMeta is config-drive v2's openstack/latest/meta_data.json.
type OpenStackMeta struct {
	UUID             string            `json:"uuid"`
	Hostname         string            `json:"hostname,omitempty"`
	Name             string            `json:"name,omitempty"`
	PublicKeys       map[string]string `json:"public_keys,omitempty"`
	LaunchIndex      int               `json:"launch_index"`
	AvailabilityZone string            `json:"availability_zone,omitempty"`
}

const configDriveDir = "openstack/latest/"

func renderConfigDrive(d *Documents, j *job.Job, userData []byte, seed, adminPass string) error {
	m := OpenStackMeta{UUID: d.InstanceID, Hostname: j.Hostname, Name: j.Hostname}
	if m.Name == "" {
		m.Name = j.Domain
	}
	if len(j.SSHAuthorizedKeys) > 0 {
		m.PublicKeys = map[string]string{}
		for i, k := range j.SSHAuthorizedKeys {
			m.PublicKeys[fmt.Sprintf("key-%d", i)] = k
		}
	}
	meta := map[string]any{}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("rendering meta_data.json: %w", err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("rendering meta_data.json: %w", err)
	}
	if seed != "" {
		meta["random_seed"] = seed
	}
	for k, v := range j.MetaData {
		meta[k] = v
	}
	if j.IsWindows() {
		addWindowsMeta(meta, j, adminPass)
	}
	md, err := marshalJSON(meta)
	if err != nil {
		return fmt.Errorf("rendering meta_data.json: %w", err)
	}
	d.Files = append(d.Files, File{configDriveDir + "meta_data.json", md})
	if !j.IsWindows() || len(userData) > 0 {
		d.Files = append(d.Files, File{configDriveDir + "user_data", userData})
	}
	if j.NetworkData != nil {
		b, err := marshalJSON(j.NetworkData)
		if err != nil {
			return fmt.Errorf("rendering network_data.json: %w", err)
		}
		d.Files = append(d.Files, File{configDriveDir + "network_data.json", b})
	} else if nd := buildNetworkData(j); nd != nil {
		b, err := marshalJSON(nd)
		if err != nil {
			return fmt.Errorf("rendering network_data.json: %w", err)
		}
		d.Files = append(d.Files, File{configDriveDir + "network_data.json", b})
	}
	if vd := j.VendorDataRaw(); vd != "" {
		// a JSON string holds text: gzip vendor-data goes in as the text
		// cloud-init would decompress it to
		text, err := job.UserDataText(vd)
		if err != nil {
			return fmt.Errorf("rendering vendor_data.json: %w", err)
		}
		b, err := marshalJSON(map[string]string{"cloud-init": text})
		if err != nil {
			return fmt.Errorf("rendering vendor_data.json: %w", err)
		}
		d.Files = append(d.Files, File{configDriveDir + "vendor_data.json", b})
	}
	sort.SliceStable(d.Files, func(a, b int) bool { return d.Files[a].Path < d.Files[b].Path })
	return nil
}

func marshalJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// addWindowsMeta adds to a Windows guest's meta_data.json what
// cloudbase-init's BaseOpenStackService reads beyond cloud-init: the SSH
// keys again as "keys" entries of type "ssh", and under "meta" (merged
// with a meta object meta_data gives; payload/kinds/cloudbase refuses a key
// given both ways) the administrator's name (admin_username, read only
// there), password (admin_pass) and first certificate, cut into admin_cert0,
// admin_cert1, ... of job.MaxAdminCertChunk characters, which
// cloudbase-init joins again; further certificates become "keys" entries of
// type "x509".
func addWindowsMeta(meta map[string]any, j *job.Job, adminPass string) {
	var keys []any
	for i, k := range j.SSHAuthorizedKeys {
		keys = append(keys, map[string]any{"name": fmt.Sprintf("key-%d", i), "type": "ssh", "data": k})
	}
	m := map[string]any{}
	if given, ok := meta["meta"].(map[string]any); ok {
		for k, v := range given {
			m[k] = v
		}
	}
	if j.AdminUsername != "" {
		m["admin_username"] = j.AdminUsername
	}
	if adminPass != "" {
		m["admin_pass"] = adminPass
	}
	for i, c := range j.AdminCerts {
		if i > 0 {
			keys = append(keys, map[string]any{"name": fmt.Sprintf("cert-%d", i), "type": "x509", "data": c})
			continue
		}
		for n := 0; len(c) > 0; n++ {
			piece := c[:min(len(c), job.MaxAdminCertChunk)]
			m[fmt.Sprintf("admin_cert%d", n)] = piece
			c = c[len(piece):]
		}
	}
	if len(keys) > 0 {
		meta["keys"] = keys
	}
	if len(m) > 0 {
		meta["meta"] = m
	}
}
