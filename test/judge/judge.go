// Package judge asks the real, installed cloud-init what it makes of a
// payload image. It runs judge.py (next to this file) with /usr/bin/python3,
// which probes the image with blkid, extracts it with xorriso or mtools and
// feeds the tree to cloud-init's own datasource readers, user-data
// processor, cloud-config mergers, schema validator and network renderers.
//
// Tests anywhere in the repository use it as their oracle: a self-made
// parser agreeing with a self-made writer proves nothing.
package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// Python is the interpreter that has Debian's cloud-init package importable.
// The python3 first on PATH may be a different installation without it.
const Python = "/usr/bin/python3"

// python is the interpreter actually run; tests replace it to prove the
// judge fails loudly without cloudinit.
var python = Python

// Datasource names reported in Report.Datasource.
const (
	// NoCloud is an iso9660/vfat filesystem labelled cidata or CIDATA.
	NoCloud = "NoCloud"
	// ConfigDrive is an iso9660/vfat filesystem labelled config-2 or CONFIG-2.
	ConfigDrive = "ConfigDrive"
)

// Part is one user-data part after cloud-init's UserDataProcessor.
type Part struct {
	// Index is the position in the processed message, from 0.
	Index int `json:"index"`
	// Filename is the part's file name (cloud-init invents part-NNN).
	Filename string `json:"filename"`
	// ContentType is the type cloud-init settled on, e.g. text/cloud-config.
	ContentType string `json:"content_type"`
	// Content is the decoded payload.
	Content string `json:"content"`
	// MergeType is the part's Merge-Type header, if any.
	MergeType string `json:"merge_type"`
}

// SchemaResult is the outcome of `cloud-init schema --config-file` on one
// cloud-config part.
type SchemaResult struct {
	// Index is the Part.Index this result belongs to.
	Index int `json:"index"`
	// Filename is the Part.Filename this result belongs to.
	Filename string `json:"filename"`
	// Valid is true when cloud-init exited 0.
	Valid bool `json:"valid"`
	// Messages are cloud-init's output lines.
	Messages []string `json:"messages"`
	// Deprecations are the schema lines flagged DEPRECATED (valid today,
	// announced to break in a later cloud-init).
	Deprecations []string `json:"deprecations"`
}

// Script is a shell-script (or boothook) part cloud-init would run.
type Script struct {
	// Filename is the part's file name.
	Filename string `json:"filename"`
	// ContentType is e.g. text/x-shellscript or text/x-shellscript-per-boot.
	ContentType string `json:"content_type"`
	// Content is the script text.
	Content string `json:"content"`
}

// UserData is what cloud-init makes of user-data or vendor-data.
type UserData struct {
	// Parts are all parts after processing, in order.
	Parts []Part `json:"parts"`
	// MergedCloudConfig is cloud-init's merge of all cloud-config parts,
	// nil when there is none.
	MergedCloudConfig map[string]any `json:"merged_cloud_config"`
	// CloudConfigTxt is the cloud-config.txt cloud-init writes from it.
	CloudConfigTxt string `json:"cloud_config_txt"`
	// WriteFiles are the files cloud-init's write_files module would write
	// from MergedCloudConfig, contents decoded by the module's own
	// extract_contents (encoding b64, gzip, …).
	WriteFiles []WrittenFile `json:"write_files"`
	// Schema holds one result per text/cloud-config part.
	Schema []SchemaResult `json:"schema"`
	// Scripts are the shell-script and boothook parts.
	Scripts []Script `json:"scripts"`
	// Includes are #include URLs (recorded, never fetched).
	Includes []string `json:"includes"`
	// Unknown are parts no default handler takes (cloud-init ignores them).
	Unknown []Script `json:"unknown"`
	// Jinja are the file names of "## template: jinja" parts, rendered
	// with the judge's fixed instance data (v1.instance_id
	// "judge-instance", v1.local_hostname "judge-host") and handed to the
	// cloud-config handler as cloud-init does.
	Jinja []string `json:"jinja"`
	// Errors are cloud-init's complaints while processing and merging.
	Errors []string `json:"errors"`
}

// WrittenFile is one file of write_files as cloud-init would write it.
type WrittenFile struct {
	// Path is the file's path in the guest.
	Path string `json:"path"`
	// Content is the decoded content (base64 in the judge's JSON).
	Content []byte `json:"content_b64"`
	// Defer is true when it is written in the final stage.
	Defer bool `json:"defer"`
}

// SchemaErrors returns the messages of every cloud-config part that failed
// cloud-init's schema validation.
func (u *UserData) SchemaErrors() []string {
	if u == nil {
		return nil
	}
	var out []string
	for _, s := range u.Schema {
		if !s.Valid {
			out = append(out, fmt.Sprintf("%s: %s", s.Filename, strings.Join(s.Messages, "; ")))
		}
	}
	return out
}

// Report is what real cloud-init makes of one image.
type Report struct {
	// Image is the absolute path judged.
	Image string `json:"image"`
	// CloudInitVersion is the version of the cloud-init that judged.
	CloudInitVersion string `json:"cloud_init_version"`
	// FSType is blkid's TYPE.
	FSType string `json:"fs_type"`
	// Label is blkid's LABEL.
	Label string `json:"label"`
	// LabelFatboot is blkid's LABEL_FATBOOT (vfat boot-sector label).
	LabelFatboot string `json:"label_fatboot"`
	// Datasource is NoCloud, ConfigDrive, or "" when not a seed.
	Datasource string `json:"datasource"`
	// ValidSeed is true when cloud-init's reader accepted the tree.
	ValidSeed bool `json:"valid_seed"`
	// Files are the paths extracted from the image, slash-separated.
	Files []string `json:"files"`
	// MetaData is the meta-data dict after cloud-init's defaults merge.
	MetaData map[string]any `json:"meta_data"`
	// InstanceID is the instance-id cloud-init will use.
	InstanceID string `json:"instance_id"`
	// Hostname is local-hostname from the metadata.
	Hostname string `json:"hostname"`
	// PublicKeys are the SSH keys as cloud-init normalises them.
	PublicKeys []string `json:"public_keys"`
	// DSMode is the dsmode from the metadata, if any.
	DSMode string `json:"dsmode"`
	// UserDataRaw is the raw user-data.
	UserDataRaw string `json:"user_data_raw"`
	// VendorDataRaw is the raw vendor-data (for ConfigDrive: after
	// convert_vendordata, so it may be a JSON list or string).
	VendorDataRaw any `json:"vendor_data_raw"`
	// UserData is the processed user-data; nil when not read.
	UserData *UserData `json:"user_data"`
	// VendorData is the processed vendor-data; nil when not read.
	VendorData *UserData `json:"vendor_data"`
	// NetworkConfigRaw is network-config (NoCloud) or network_data.json.
	NetworkConfigRaw string `json:"network_config_raw"`
	// NetworkConfig is the network config cloud-init hands to the distro
	// (for ConfigDrive: the result of openstack.convert_net_json).
	NetworkConfig map[string]any `json:"network_config"`
	// NetworkState is parse_net_config_data's internal state.
	NetworkState map[string]any `json:"network_state"`
	// RenderedNetwork maps output kind (eni, netplan, networkd) to
	// file path to content, from `cloud-init devel net-convert`.
	RenderedNetwork map[string]map[string]string `json:"rendered_network"`
	// NetworkErrors are cloud-init's complaints about the network config.
	NetworkErrors []string `json:"network_errors"`
	// InjectedFiles are ConfigDrive `files` entries (path -> content).
	InjectedFiles map[string]string `json:"injected_files"`
	// NetworkENI is the ConfigDrive legacy network_config content.
	NetworkENI string `json:"network_eni"`
	// AssumedMACs maps MAC to the NIC name the judge assumed the guest
	// has when converting network_data.json.
	AssumedMACs map[string]string `json:"assumed_macs"`
	// RandomSeed is, base64-encoded, what cloud-init's seed_random module
	// would add to the guest's entropy: the cloud-config random_seed
	// decoded by the module, then the metadata's random_seed (config-2
	// meta_data.json); "" when there is none.
	RandomSeed string `json:"random_seed"`
	// Errors are cloud-init's complaints about the seed itself.
	Errors []string `json:"errors"`

	// Parts are UserData.Parts (user-data after cloud-init's processor).
	Parts []Part `json:"-"`
	// MergedCloudConfig is UserData.MergedCloudConfig: the user-data
	// cloud-config as cloud-init merges it; nil when there is none.
	MergedCloudConfig map[string]any `json:"-"`
	// Scripts are UserData.Scripts: shell-script and boothook parts.
	Scripts []Script `json:"-"`
	// SchemaErrors are the messages of user-data and vendor-data
	// cloud-config parts that fail `cloud-init schema`.
	SchemaErrors []string `json:"-"`
	// Deprecations are DEPRECATED schema messages (still valid in 22.4).
	Deprecations []string `json:"-"`
}

// fill sets the convenience fields derived from UserData and VendorData.
func (r *Report) fill() {
	r.Parts, r.MergedCloudConfig, r.Scripts = nil, nil, nil
	r.SchemaErrors, r.Deprecations = nil, nil
	if u := r.UserData; u != nil {
		r.Parts = u.Parts
		r.MergedCloudConfig = u.MergedCloudConfig
		r.Scripts = u.Scripts
	}
	r.SchemaErrors = append(r.SchemaErrors, r.UserData.SchemaErrors()...)
	for _, e := range r.VendorData.SchemaErrors() {
		r.SchemaErrors = append(r.SchemaErrors, "vendor-data "+e)
	}
	for _, u := range []*UserData{r.UserData, r.VendorData} {
		if u == nil {
			continue
		}
		for _, s := range u.Schema {
			r.Deprecations = append(r.Deprecations, s.Deprecations...)
		}
	}
}

// AllErrors returns every complaint in the report: seed, user-data,
// vendor-data, schema and network.
func (r *Report) AllErrors() []string {
	out := append([]string(nil), r.Errors...)
	if r.UserData != nil {
		out = append(out, r.UserData.Errors...)
	}
	if r.VendorData != nil {
		for _, e := range r.VendorData.Errors {
			out = append(out, "vendor-data: "+e)
		}
	}
	out = append(out, r.SchemaErrors...)
	out = append(out, r.NetworkErrors...)
	return out
}

// OK reports whether cloud-init would use the image without any complaint.
func (r *Report) OK() bool {
	return r.Datasource != "" && r.ValidSeed && len(r.AllErrors()) == 0
}

// ScriptPath returns the absolute path of judge.py, found next to this
// source file so that tests in any package can use the judge.
func ScriptPath() (string, error) {
	p := testenv.RepoPath("test", "judge", "judge.py")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("judge: locating judge.py: %w", err)
	}
	return p, nil
}

// CheckEnvironment returns an error naming what is missing when the judge
// cannot run: /usr/bin/python3 without cloudinit, or blkid, xorriso,
// mcopy or cloud-init absent.
func CheckEnvironment(ctx context.Context) error {
	var missing []string
	for _, tool := range []string{"blkid", "xorriso", "mcopy", "cloud-init"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("judge: required tools not on PATH: %s (apt-get install util-linux xorriso mtools cloud-init)",
			strings.Join(missing, ", "))
	}
	out, err := exec.CommandContext(ctx, python, "-c", "import cloudinit.sources.helpers.openstack, cloudinit.user_data").CombinedOutput()
	if err != nil {
		return fmt.Errorf("judge: %s cannot import cloudinit (apt-get install cloud-init): %w: %s",
			python, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Judge runs real cloud-init over the image at imagePath and returns its
// verdict. An error means the judge could not run (missing tools, no
// cloudinit, bad output); cloud-init's complaints about the image are in
// the Report.
func Judge(ctx context.Context, imagePath string) (*Report, error) {
	return JudgeWith(ctx, imagePath, Options{})
}

// IncludePrefix is the URL prefix of #include lines the judge serves from
// Options.IncludesDir (the rest of the URL is a file name in it).
const IncludePrefix = "http://includes.invalid/"

// Options tune a judgement.
type Options struct {
	// IncludesDir, when set, serves #include URLs under IncludePrefix from
	// this directory, processed as cloud-init processes fetched content.
	// Other URLs are recorded, never fetched.
	IncludesDir string
	// NoSchema skips `cloud-init schema` on cloud-config parts (one
	// cloud-init start-up each): Report.SchemaErrors stays empty. For tests
	// that judge many images and compare data, not schema.
	NoSchema bool
}

func (o Options) env() []string {
	env := os.Environ()
	if o.IncludesDir != "" {
		env = append(env, "VMPAYLOAD_JUDGE_INCLUDES="+o.IncludesDir)
	}
	if o.NoSchema {
		env = append(env, "VMPAYLOAD_JUDGE_NO_SCHEMA=1")
	}
	return env
}

// LoadUserData returns what cloud-init's user-data processor and
// cloud-config mergers make of each raw document (gzip, MIME, #include,
// archive, cloud-config, as user-data or vendor-data), without an image
// and without schema checks. It is the "loader applied to the input" side
// of the rule vmpayload keeps: what it writes must load to the same data.
func LoadUserData(ctx context.Context, opt Options, docs ...[]byte) ([]*UserData, error) {
	script, err := ScriptPath()
	if err != nil {
		return nil, err
	}
	if err := CheckEnvironment(ctx); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "vmpayload-judge-ud-")
	if err != nil {
		return nil, fmt.Errorf("judge: %w", err)
	}
	defer os.RemoveAll(dir)
	args := []string{script, "--user-data"}
	for i, d := range docs {
		p := filepath.Join(dir, fmt.Sprintf("doc-%d", i))
		if err := os.WriteFile(p, d, 0o600); err != nil {
			return nil, fmt.Errorf("judge: %w", err)
		}
		args = append(args, p)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = &stdout, &stderr, opt.env()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("judge: running %s --user-data: %w: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	var out []*UserData
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out) != len(docs) {
		return nil, fmt.Errorf("judge: decoding --user-data output (%d results for %d documents): %v", len(out), len(docs), err)
	}
	return out, nil
}

// JudgeWith is Judge with options.
func JudgeWith(ctx context.Context, imagePath string, opt Options) (*Report, error) {
	r, err := JudgeMany(ctx, []string{imagePath}, opt)
	if err != nil {
		return nil, err
	}
	return r[0], nil
}

// JudgeMany judges several images in one run of judge.py (one Python and
// cloud-init start-up for all), returning one report per image in order.
func JudgeMany(ctx context.Context, imagePaths []string, opt Options) ([]*Report, error) {
	script, err := ScriptPath()
	if err != nil {
		return nil, err
	}
	if err := CheckEnvironment(ctx); err != nil {
		return nil, err
	}
	if len(imagePaths) == 0 {
		return nil, nil
	}
	args := []string{script}
	for _, p := range imagePaths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("judge: resolving image path %q: %w", p, err)
		}
		args = append(args, abs)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = opt.env()
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("judge: running %s on %v: %w: %s", script, imagePaths, err, strings.TrimSpace(stderr.String()))
	}
	var out []*Report
	if len(imagePaths) == 1 {
		var r Report
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("judge: decoding report for %s: %w", imagePaths[0], err)
		}
		out = []*Report{&r}
	} else if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out) != len(imagePaths) {
		return nil, fmt.Errorf("judge: decoding reports for %d images (%d decoded): %v", len(imagePaths), len(out), err)
	}
	for _, r := range out {
		r.fill()
	}
	return out, nil
}

// HashVerifies reports whether hash, a SHA-512 crypt string ($6$...), is
// the hash of plaintext, checked with `openssl passwd -6`.
func HashVerifies(hash, plaintext string) (bool, error) {
	return hashVerifies(context.Background(), hash, plaintext)
}

func hashVerifies(ctx context.Context, hash, plaintext string) (bool, error) {
	fields := strings.Split(hash, "$")
	// "", "6", ["rounds=N",] salt, digest
	if len(fields) < 4 || fields[0] != "" || fields[1] != "6" {
		return false, fmt.Errorf("judge: checking hash: %q is not a SHA-512 crypt string ($6$salt$digest)", hash)
	}
	salt := fields[2]
	if strings.HasPrefix(salt, "rounds=") || strings.ContainsAny(plaintext, "\r\n") {
		// openssl passwd takes neither rounds= nor multi-line input.
		return runCrypt(ctx, hash, plaintext)
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		return false, fmt.Errorf("judge: checking hash: openssl not on PATH (apt-get install openssl): %w", err)
	}
	cmd := exec.CommandContext(ctx, "openssl", "passwd", "-6", "-salt", salt, "-stdin")
	cmd.Stdin = strings.NewReader(plaintext + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("judge: checking hash with openssl passwd -6: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)) == hash, nil
}

// runCrypt checks hash with Python's crypt module (handles rounds=).
func runCrypt(ctx context.Context, hash, plaintext string) (bool, error) {
	cmd := exec.CommandContext(ctx, python, "-W", "ignore", "-c",
		"import crypt,sys; sys.stdout.write(crypt.crypt(sys.stdin.read(), sys.argv[1]))", hash)
	cmd.Stdin = strings.NewReader(plaintext)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("judge: checking hash with %s crypt: %w: %s", python, err, strings.TrimSpace(stderr.String()))
	}
	return string(out) == hash, nil
}
