package guest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DefaultWait bounds WaitReport when ctx has no deadline.
const DefaultWait = 600 * time.Second

// Command is the outcome of one command the guest ran for the report.
type Command struct {
	// Argv is the command line.
	Argv []string `json:"argv"`
	// RC is the exit status (127: not found, 124: timed out).
	RC int `json:"rc"`
	// Out is standard output.
	Out string `json:"out"`
	// Err is standard error.
	Err string `json:"err"`
}

// File describes one path inside the guest.
type File struct {
	// Path is the absolute path in the guest.
	Path string `json:"path"`
	// Type is file, dir, symlink or other.
	Type string `json:"type"`
	// Mode is the permission bits in octal, e.g. "640".
	Mode string `json:"mode"`
	// Owner is the owning user's name (or uid).
	Owner string `json:"owner"`
	// Group is the owning group's name (or gid).
	Group string `json:"group"`
	// Size is the size in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of a regular file's content.
	SHA256 string `json:"sha256"`
	// Target is a symlink's target.
	Target string `json:"target"`
	// ContentB64 is the base64 content of regular files up to 64 KiB.
	ContentB64 string `json:"content_b64"`
	// Error is set when the guest could not stat or read the path.
	Error string `json:"error"`
}

// Content returns the decoded content and whether the guest included it.
func (f File) Content() ([]byte, bool) {
	if f.Type != "file" || (f.ContentB64 == "" && f.Size != 0) {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(f.ContentB64)
	if err != nil {
		return nil, false
	}
	return b, true
}

type fileList struct {
	Files   []File `json:"files"`
	Content string `json:"content"`
}

// Meta is the report's meta section.
type Meta struct {
	// Format is the report format version.
	Format int `json:"format"`
	// BootID is the guest kernel's boot id.
	BootID string `json:"boot_id"`
	// Cmdline is the guest kernel command line.
	Cmdline string `json:"cmdline"`
	// Kernel is the guest kernel release.
	Kernel string `json:"kernel"`
	// OSRelease is /etc/os-release.
	OSRelease map[string]string `json:"os_release"`
	// UptimeSeconds is the guest uptime when the report was made.
	UptimeSeconds float64 `json:"uptime_s"`
	// CloudInitDisabled is true when ds-identify disabled cloud-init.
	CloudInitDisabled bool `json:"cloud_init_disabled"`
}

// PasswdEntry is one getent passwd line.
type PasswdEntry struct {
	Name, Password     string
	UID, GID           int
	Gecos, Home, Shell string
}

// GroupEntry is one getent group line.
type GroupEntry struct {
	Name    string
	GID     int
	Members []string
}

// ShadowEntry is one /etc/shadow line (first two fields).
type ShadowEntry struct {
	// Name is the user name.
	Name string
	// Hash is the password field: a crypt hash, "*", "!" or "!"-prefixed.
	Hash string
}

// Addr is one address of an interface in `ip -j addr`.
type Addr struct {
	// Family is inet or inet6.
	Family string `json:"family"`
	// Local is the address.
	Local string `json:"local"`
	// PrefixLen is the prefix length.
	PrefixLen int `json:"prefixlen"`
	// Scope is global, link or host.
	Scope string `json:"scope"`
}

// Link is one interface in `ip -j addr`.
type Link struct {
	// Name is the interface name.
	Name string `json:"ifname"`
	// MAC is the link-layer address.
	MAC string `json:"address"`
	// MTU is the interface MTU.
	MTU int `json:"mtu"`
	// OperState is UP, DOWN, UNKNOWN, ...
	OperState string `json:"operstate"`
	// Flags are the interface flags (UP, LOWER_UP, ...).
	Flags []string `json:"flags"`
	// Addrs are the configured addresses.
	Addrs []Addr `json:"addr_info"`
}

// Route is one entry of `ip -j route` / `ip -6 -j route`.
type Route struct {
	// Dst is the destination ("default" or a prefix).
	Dst string `json:"dst"`
	// Gateway is the next hop, if any.
	Gateway string `json:"gateway"`
	// Dev is the output interface.
	Dev string `json:"dev"`
	// Protocol is kernel, static, boot, ...
	Protocol string `json:"protocol"`
	// Metric is the route metric.
	Metric int `json:"metric"`
}

// CloudInitResult is /run/cloud-init/result.json.
type CloudInitResult struct {
	V1 struct {
		// Datasource is e.g. "DataSourceNoCloud [seed=/dev/sr0][dsmode=net]".
		Datasource string `json:"datasource"`
		// Errors lists errors of the final stage.
		Errors []string `json:"errors"`
		// RecoverableErrors (cloud-init ≥ 23.4) lists warnings by level.
		RecoverableErrors map[string][]string `json:"recoverable_errors"`
	} `json:"v1"`
}

// Report is what the guest printed on its serial console after cloud-init
// finished. Raw keeps every section's decoded JSON for checks the typed
// fields do not cover.
type Report struct {
	// Raw maps section name to its decoded JSON document.
	Raw map[string]json.RawMessage
	// Meta is the meta section.
	Meta Meta
	// Hostname is `hostname` output, trimmed.
	Hostname string
	// FQDN is `hostname -f` output, trimmed.
	FQDN string
	// Passwd is `getent passwd`.
	Passwd []PasswdEntry
	// Groups is `getent group`.
	Groups []GroupEntry
	// Shadow is /etc/shadow.
	Shadow []ShadowEntry
	// Sudoers lists /etc/sudoers.d and its files.
	Sudoers []File
	// AuthorizedKeys lists the .ssh directories of /root and /home/* with
	// their files.
	AuthorizedKeys []File
	// Timezone is `readlink /etc/localtime`.
	Timezone string
	// Links is `ip -j addr`.
	Links []Link
	// Routes is `ip -j route`.
	Routes []Route
	// Routes6 is `ip -6 -j route`.
	Routes6 []Route
	// ResolvConf is the content of /etc/resolv.conf.
	ResolvConf string
	// Resolvectl is `resolvectl status`, empty when absent.
	Resolvectl string
	// Result is /run/cloud-init/result.json; ResultRaw its bytes.
	Result CloudInitResult
	// ResultRaw is the raw result.json, nil when absent.
	ResultRaw []byte
	// StatusRaw is /run/cloud-init/status.json, nil when absent.
	StatusRaw []byte
	// StatusLong is `cloud-init status --long`.
	StatusLong Command
	// CloudInitVersion is `cloud-init --version` output.
	CloudInitVersion string
	// NetworkConfig lists rendered network configuration files
	// (/etc/network/interfaces*, /etc/netplan, /etc/systemd/network,
	// /run/systemd/network).
	NetworkConfig []File
	// Files lists everything under /etc/vmpayload-e2e, /var/lib/vmpayload-e2e
	// and paths given with vmpx.paths= on the kernel command line.
	Files []File
	// LogProblems is the WARNING/ERROR/Traceback lines of cloud-init.log.
	LogProblems string
	// FailedUnits is `systemctl --failed`.
	FailedUnits string
}

// User returns the passwd entry of name.
func (r *Report) User(name string) (PasswdEntry, bool) {
	for _, u := range r.Passwd {
		if u.Name == name {
			return u, true
		}
	}
	return PasswdEntry{}, false
}

// Group returns the group entry of name.
func (r *Report) Group(name string) (GroupEntry, bool) {
	for _, g := range r.Groups {
		if g.Name == name {
			return g, true
		}
	}
	return GroupEntry{}, false
}

// ShadowHash returns the password field of user in /etc/shadow.
func (r *Report) ShadowHash(user string) (string, bool) {
	for _, s := range r.Shadow {
		if s.Name == user {
			return s.Hash, true
		}
	}
	return "", false
}

// UserAuthorizedKeys returns the key lines of ~user/.ssh/authorized_keys.
func (r *Report) UserAuthorizedKeys(user string) []string {
	u, ok := r.User(user)
	if !ok {
		return nil
	}
	f, ok := findFile(r.AuthorizedKeys, strings.TrimRight(u.Home, "/")+"/.ssh/authorized_keys")
	if !ok {
		return nil
	}
	b, _ := f.Content()
	var keys []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			keys = append(keys, l)
		}
	}
	return keys
}

// File returns the entry for path from Files, Sudoers, AuthorizedKeys or
// NetworkConfig.
func (r *Report) File(path string) (File, bool) {
	for _, list := range [][]File{r.Files, r.Sudoers, r.AuthorizedKeys, r.NetworkConfig} {
		if f, ok := findFile(list, path); ok {
			return f, true
		}
	}
	return File{}, false
}

// Text returns the content of the file at path in r.Files as a string,
// or "" when the guest did not report it.
func (r *Report) Text(path string) string {
	f, _ := findFile(r.Files, path)
	b, _ := f.Content()
	return string(b)
}

// Sums reads the report file at path as `sha256sum` printed it for the
// files under "." and returns each file's sum by its path (without "./").
func (r *Report) Sums(path string) map[string]string {
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.Text(path)), "\n") {
		if sum, p, ok := strings.Cut(line, "  ./"); ok {
			sums[p] = sum
		}
	}
	return sums
}

func findFile(list []File, path string) (File, bool) {
	for _, f := range list {
		if f.Path == path {
			return f, true
		}
	}
	return File{}, false
}

// LinkByMAC returns the interface with the given MAC (case-insensitive).
func (r *Report) LinkByMAC(mac string) (Link, bool) {
	for _, l := range r.Links {
		if strings.EqualFold(l.MAC, mac) {
			return l, true
		}
	}
	return Link{}, false
}

// HasAddr reports whether link carries local/prefixLen.
func (l Link) HasAddr(local string, prefixLen int) bool {
	for _, a := range l.Addrs {
		if a.Local == local && a.PrefixLen == prefixLen {
			return true
		}
	}
	return false
}

// ParseReports extracts every complete report from a serial log, in order
// (one per boot that ran the report unit). The log may be read while the
// guest still writes it: a last line without its newline is not read (it
// may be cut anywhere, "VMPX meta 1" of "VMPX meta 1/2 …"), so that a
// report being written is incomplete, never malformed.
func ParseReports(log []byte) ([]*Report, error) {
	var reports []*Report
	var cur map[string]*sectionBuf
	var order []string
	if i := bytes.LastIndexByte(log, '\n'); i >= 0 {
		log = log[:i+1]
	} else {
		log = nil
	}
	for _, raw := range bytes.Split(log, []byte("\n")) {
		line := strings.TrimRight(string(raw), "\r")
		// Console output of other writers may precede a marker on its line.
		switch {
		case strings.Contains(line, "VMPX-BEGIN "):
			cur = map[string]*sectionBuf{}
			order = nil
		case strings.Contains(line, "VMPX-END "):
			if cur == nil {
				continue
			}
			f := strings.Fields(line[strings.Index(line, "VMPX-END "):])
			want, _ := strconv.Atoi(f[len(f)-1])
			if len(order) != want {
				return reports, fmt.Errorf("guest: parsing report %d: %d sections, VMPX-END says %d", len(reports)+1, len(order), want)
			}
			rep, err := buildReport(cur, order)
			if err != nil {
				return reports, fmt.Errorf("guest: parsing report %d: %w", len(reports)+1, err)
			}
			reports = append(reports, rep)
			cur = nil
		case cur != nil && strings.Contains(line, "VMPX "):
			f := strings.Fields(line[strings.Index(line, "VMPX "):])
			if len(f) < 3 || len(f) > 4 {
				return reports, fmt.Errorf("guest: parsing report %d: malformed line %.120q", len(reports)+1, line)
			}
			name := f[1]
			var i, n int
			if _, err := fmt.Sscanf(f[2], "%d/%d", &i, &n); err != nil {
				return reports, fmt.Errorf("guest: parsing report %d: section %s: bad chunk index %q: %w", len(reports)+1, name, f[2], err)
			}
			chunk := ""
			if len(f) == 4 {
				chunk = f[3]
			}
			sb, ok := cur[name]
			if !ok {
				sb = &sectionBuf{count: n}
				cur[name] = sb
				order = append(order, name)
			}
			if i != len(sb.chunks)+1 || n != sb.count {
				return reports, fmt.Errorf("guest: parsing report %d: section %s: chunk %d/%d out of order after %d", len(reports)+1, name, i, n, len(sb.chunks))
			}
			sb.chunks = append(sb.chunks, chunk)
		}
	}
	return reports, nil
}

type sectionBuf struct {
	count  int
	chunks []string
}

func buildReport(secs map[string]*sectionBuf, order []string) (*Report, error) {
	r := &Report{Raw: map[string]json.RawMessage{}}
	for _, name := range order {
		sb := secs[name]
		if len(sb.chunks) != sb.count {
			return nil, fmt.Errorf("section %s: %d of %d chunks", name, len(sb.chunks), sb.count)
		}
		b, err := base64.StdEncoding.DecodeString(strings.Join(sb.chunks, ""))
		if err != nil {
			return nil, fmt.Errorf("section %s: decoding base64: %w", name, err)
		}
		if !json.Valid(b) {
			return nil, fmt.Errorf("section %s: not JSON", name)
		}
		r.Raw[name] = b
	}
	if err := r.decode(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Report) cmd(name string) (Command, error) {
	var c Command
	b, ok := r.Raw[name]
	if !ok {
		return c, nil
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("section %s: %w", name, err)
	}
	return c, nil
}

func (r *Report) files(name string) ([]File, string, error) {
	var fl fileList
	b, ok := r.Raw[name]
	if !ok {
		return nil, "", nil
	}
	if err := json.Unmarshal(b, &fl); err != nil {
		return nil, "", fmt.Errorf("section %s: %w", name, err)
	}
	return fl.Files, fl.Content, nil
}

func (r *Report) fileContent(section, path string) ([]byte, error) {
	fs, _, err := r.files(section)
	if err != nil {
		return nil, err
	}
	f, ok := findFile(fs, path)
	if !ok {
		return nil, nil
	}
	b, _ := f.Content()
	return b, nil
}

func (r *Report) decode() error {
	if b, ok := r.Raw["meta"]; ok {
		if err := json.Unmarshal(b, &r.Meta); err != nil {
			return fmt.Errorf("section meta: %w", err)
		}
	}
	var errs []error
	get := func(name string) Command {
		c, err := r.cmd(name)
		errs = append(errs, err)
		return c
	}
	getFiles := func(name string) []File {
		fs, _, err := r.files(name)
		errs = append(errs, err)
		return fs
	}
	r.Hostname = strings.TrimSpace(get("hostname").Out)
	r.FQDN = strings.TrimSpace(get("fqdn").Out)
	r.CloudInitVersion = strings.TrimSpace(get("cloud_init_version").Out)
	r.Timezone = strings.TrimSpace(get("timezone").Out)
	r.Resolvectl = get("resolvectl").Out
	r.StatusLong = get("status_long")
	r.LogProblems = get("cloud_init_log_problems").Out
	r.FailedUnits = get("failed_units").Out
	r.Sudoers = getFiles("sudoers")
	r.AuthorizedKeys = getFiles("authorized_keys")
	r.NetworkConfig = getFiles("network_config")
	r.Files = getFiles("files")
	_, rc, err := r.files("resolv_conf")
	errs = append(errs, err)
	r.ResolvConf = rc
	for _, l := range lines(get("passwd").Out) {
		f := strings.Split(l, ":")
		if len(f) != 7 {
			continue
		}
		uid, _ := strconv.Atoi(f[2])
		gid, _ := strconv.Atoi(f[3])
		r.Passwd = append(r.Passwd, PasswdEntry{Name: f[0], Password: f[1], UID: uid, GID: gid, Gecos: f[4], Home: f[5], Shell: f[6]})
	}
	for _, l := range lines(get("group").Out) {
		f := strings.Split(l, ":")
		if len(f) != 4 {
			continue
		}
		gid, _ := strconv.Atoi(f[2])
		var members []string
		if f[3] != "" {
			members = strings.Split(f[3], ",")
		}
		r.Groups = append(r.Groups, GroupEntry{Name: f[0], GID: gid, Members: members})
	}
	for _, l := range lines(get("shadow").Out) {
		f := strings.Split(l, ":")
		if len(f) >= 2 {
			r.Shadow = append(r.Shadow, ShadowEntry{Name: f[0], Hash: f[1]})
		}
	}
	for name, dst := range map[string]any{"ip_addr": &r.Links, "ip_route": &r.Routes, "ip6_route": &r.Routes6} {
		c := get(name)
		if strings.TrimSpace(c.Out) == "" {
			continue
		}
		if err := json.Unmarshal([]byte(c.Out), dst); err != nil {
			errs = append(errs, fmt.Errorf("section %s: %w", name, err))
		}
	}
	var err2 error
	r.ResultRaw, err2 = r.fileContent("result_json", "/run/cloud-init/result.json")
	errs = append(errs, err2)
	if len(r.ResultRaw) > 0 {
		if err := json.Unmarshal(r.ResultRaw, &r.Result); err != nil {
			errs = append(errs, fmt.Errorf("result.json: %w", err))
		}
	}
	r.StatusRaw, err2 = r.fileContent("status_json", "/run/cloud-init/status.json")
	errs = append(errs, err2)
	return errors.Join(errs...)
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, "\r"); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// SectionNames returns the report's section names, sorted.
func (r *Report) SectionNames() []string {
	names := make([]string, 0, len(r.Raw))
	for n := range r.Raw {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// WaitReport waits until the serial log at serialLogPath holds a complete
// report and returns it. It polls the file (it may not exist yet). Without a
// deadline on ctx it gives up after DefaultWait. On failure the error carries
// the last 80 lines of the serial log.
func WaitReport(ctx context.Context, serialLogPath string) (*Report, error) {
	reps, err := waitReports(ctx, serialLogPath, 1, nil)
	if err != nil {
		return nil, err
	}
	return reps[0], nil
}

// WaitReports waits for n complete reports (n boots) in the serial log, for
// reboot tests booted with vmpx.poweroff=0. Bounds as WaitReport.
func WaitReports(ctx context.Context, serialLogPath string, n int) ([]*Report, error) {
	return waitReports(ctx, serialLogPath, n, nil)
}

// KernelPanicked reports whether the guest's kernel panicked in the boot
// that has not reported yet: "Kernel panic - not syncing" after the last
// VMPX-END of log. Such a guest never reports (it hangs until destroyed),
// so waiting for its report is pointless.
func KernelPanicked(log []byte) bool {
	if i := bytes.LastIndex(log, []byte("VMPX-END ")); i >= 0 {
		log = log[i:]
	}
	return bytes.Contains(log, []byte("Kernel panic - not syncing"))
}

// waitReports polls the log; stopped, if non-nil, reports whether the guest
// has stopped, so a guest that powered off without reporting fails fast.
func waitReports(ctx context.Context, path string, n int, stopped func(context.Context) (bool, error)) ([]*Report, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWait)
		defer cancel()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		log, readErr := os.ReadFile(path)
		if readErr != nil && !errors.Is(readErr, os.ErrNotExist) {
			return nil, fmt.Errorf("guest: waiting for report: reading serial log: %w", readErr)
		}
		reps, err := ParseReports(log)
		if err != nil {
			return nil, fmt.Errorf("guest: waiting for report in %s: %w\n--- serial log tail ---\n%s", path, err, tail(string(log), 80))
		}
		if len(reps) >= n {
			return reps[:n], nil
		}
		if KernelPanicked(log) {
			return nil, fmt.Errorf("guest: waiting for report in %s: the guest's kernel panicked after %d of %d reports\n--- serial log tail ---\n%s", path, len(reps), n, tail(string(log), 80))
		}
		if stopped != nil {
			down, err := stopped(ctx)
			if err == nil && down {
				// One last read: the report may have landed just before power-off.
				log, _ = os.ReadFile(path)
				if reps, err := ParseReports(log); err == nil && len(reps) >= n {
					return reps[:n], nil
				}
				return nil, fmt.Errorf("guest: waiting for report in %s: guest stopped after %d of %d reports\n--- serial log tail ---\n%s", path, len(reps), n, tail(string(log), 80))
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("guest: waiting for report in %s: %w (got %d of %d)\n--- serial log tail ---\n%s", path, ctx.Err(), len(reps), n, tail(string(log), 80))
		case <-tick.C:
		}
	}
}
