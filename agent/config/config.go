// Package config holds the configuration of the vmpayload agent daemon.
//
// The configuration is a YAML file (configs/agent.yaml in the repository,
// installed as /etc/vmpayload/agent.yaml) whose key names are a public
// contract. Every key is also a flag of "vmpayload agent" with the same name
// written with dashes (spool_dir is --spool-dir). Precedence, lowest first:
// built-in defaults, the file named by --config, flags set on the command line.
//
// Contract keys: libvirt_uri, spool_dir, payload_dir, socket, socket_group,
// secrets_dir, workers, default_format, cdrom_bus, image_mode, image_group,
// log_format, log_level.
//
// Extensions (not part of the original contract, may still change; Config's
// fields say what each means): rescan_interval, queue_limit,
// result_retention_count, result_retention_age and the API's connection
// caps (max_connections, max_connections_per_uid, max_event_subscribers,
// max_event_subscribers_per_uid). Keys read by "vmpayload hook" (the libvirt
// qemu hook), not by the agent: hook_timeout and hook_failure.
package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmpayload/vmpayload/agent/journal"
	"go.yaml.in/yaml/v3"
)

// DefaultPath is where packages install the configuration file. Resolve reads
// it when --config is not given and the file exists.
const DefaultPath = "/etc/vmpayload/agent.yaml"

// Limits of the numeric settings.
const (
	MinWorkers        = 1
	MaxWorkers        = 256
	MinRescanInterval = 100 * time.Millisecond
	MaxQueueLimit     = 10_000_000
	MinHookTimeout    = 100 * time.Millisecond
	MaxHookTimeout    = 10 * time.Minute
	// DefaultLibvirtTimeout is libvirt_timeout's default (see Default).
	DefaultLibvirtTimeout = 2 * time.Minute
	MinLibvirtTimeout     = time.Second
	MaxLibvirtTimeout     = time.Hour
	// DefaultGuestTimeout is guest_timeout's default; Min and Max bound it.
	DefaultGuestTimeout = 15 * time.Minute
	MinGuestTimeout     = time.Minute
	MaxGuestTimeout     = 24 * time.Hour
	// Defaults and bounds of result_retention_count and
	// result_retention_age (0 turns either off).
	DefaultResultRetentionCount = 10000
	MaxResultRetentionCount     = 10_000_000
	DefaultResultRetentionAge   = 30 * 24 * time.Hour
	MinResultRetentionAge       = time.Minute
	MaxResultRetentionAge       = 10 * 365 * 24 * time.Hour
	// MinMaxConnections and MaxMaxConnections bound max_connections and
	// max_event_subscribers (a cap per uid must stay below half of them).
	MinMaxConnections = 3
	MaxMaxConnections = 1 << 20
	// maxSocketPath is the longest unix socket path Linux accepts
	// (sun_path is 108 bytes including the terminating NUL).
	maxSocketPath = 107
)

// Config is the agent's effective configuration. The yaml tags are the
// public key names.
type Config struct {
	// LibvirtURI is the libvirt connection URI.
	LibvirtURI string `yaml:"libvirt_uri"`
	// SpoolDir is the directory watched for job files (*.json).
	SpoolDir string `yaml:"spool_dir"`
	// PayloadDir is where built payload images are kept.
	PayloadDir string `yaml:"payload_dir"`
	// Socket is the path of the API unix socket.
	Socket string `yaml:"socket"`
	// SocketGroup is the group (name or numeric gid) given to the socket;
	// "" keeps the process's group.
	SocketGroup string `yaml:"socket_group"`
	// SecretsDir is the directory secret references in jobs resolve against.
	SecretsDir string `yaml:"secrets_dir"`
	// Workers is the number of jobs run concurrently (1..256).
	Workers int `yaml:"workers"`
	// DefaultFormat is the payload format of jobs that name none:
	// "nocloud" or "configdrive".
	DefaultFormat string `yaml:"default_format"`
	// CDROMBus is the bus of the payload drive: "auto", "sata", "ide" or
	// "scsi". The name is historic: it also governs the read-only disk of
	// a vfat payload, where a disk can use that bus (not ide or sata).
	CDROMBus string `yaml:"cdrom_bus"`
	// ImageModeOctal is the permission of payload images as an octal string
	// ("0640"); use ImageMode for the parsed value.
	ImageModeOctal string `yaml:"image_mode"`
	// ImageGroup is the group (name or numeric gid) given to payload images;
	// "" keeps the process's group. Use ImageGID for the resolved gid.
	ImageGroup string `yaml:"image_group"`
	// LogFormat is "text" or "json".
	LogFormat string `yaml:"log_format"`
	// LogLevel is "debug", "info", "warn" or "error".
	LogLevel string `yaml:"log_level"`
	// RescanInterval is how often the spool directory is rescanned besides
	// file-system notifications (extension; at least 100ms).
	RescanInterval time.Duration `yaml:"rescan_interval"`
	// QueueLimit is the most jobs waiting for a worker; intake refuses more
	// (extension; 1..10000000).
	QueueLimit int `yaml:"queue_limit"`
	// HookTimeout bounds one run of "vmpayload hook"; a run that takes
	// longer fails (100ms..10m).
	HookTimeout time.Duration `yaml:"hook_timeout"`
	// HookFailure is what a failed hook run does: "refuse" (the domain
	// start fails with the reason) or "boot" (the domain boots without its
	// payload; the reason is logged).
	HookFailure string `yaml:"hook_failure"`
	// AdminGroup is the group (name or numeric gid) whose members may use
	// privileged job fields (domain_xml, prebuilt_image) besides root;
	// "" (the default) means root only. See docs/security.md.
	AdminGroup string `yaml:"admin_group"`
	// SpoolGroup is the group (name or numeric gid) whose members may drop
	// jobs into the spool's incoming/ and read their own results; "" (the
	// default) keeps the spool root's only. See docs/security.md.
	SpoolGroup string `yaml:"spool_group"`
	// PrebuiltDirs lists, separated by ":" like PATH, the directories a
	// job's prebuilt_image may come from; "" (the default) disables
	// prebuilt_image. Use PrebuiltDirList for the parsed list.
	PrebuiltDirs string `yaml:"prebuilt_dirs"`
	// LibvirtTimeout bounds every libvirt call the agent makes; a call that
	// does not answer in time fails its job with libvirt_timeout and the
	// connection is reopened (1s..1h).
	LibvirtTimeout time.Duration `yaml:"libvirt_timeout"`
	// GuestReport is the default of a job's guest_report: the payload
	// carries the guest reporter and the domain the report channel
	// (docs/guest-report.md).
	GuestReport bool `yaml:"guest_report"`
	// GuestTimeout bounds the wait for a guest's first report after its
	// domain started; then the job's guest status is timeout (1m..24h).
	GuestTimeout time.Duration `yaml:"guest_timeout"`
	// ResultRetentionCount is how many results done/ and failed/ keep each
	// (with failed/'s job copies and what rejected/ holds): beyond it the
	// oldest are removed (0: no limit; at most 10000000).
	ResultRetentionCount int `yaml:"result_retention_count"`
	// ResultRetentionAge is how long a result is kept after it was written
	// (0: forever; else 1m..87600h).
	ResultRetentionAge time.Duration `yaml:"result_retention_age"`
	// MaxConnections caps the API socket's open connections; of them,
	// MaxConnectionsPerUID are kept for root (docs/reliability.md).
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerUID caps each non-root uid's open connections
	// (SO_PEERCRED); less than half of MaxConnections.
	MaxConnectionsPerUID int `yaml:"max_connections_per_uid"`
	// MaxEventSubscribers caps the open GET /v1/events streams; of them,
	// MaxEventSubscribersPerUID are kept for root.
	MaxEventSubscribers int `yaml:"max_event_subscribers"`
	// MaxEventSubscribersPerUID caps each non-root uid's event streams;
	// less than half of MaxEventSubscribers.
	MaxEventSubscribersPerUID int `yaml:"max_event_subscribers_per_uid"`
}

// Allowed values of the enumerated keys.
var (
	Formats    = []string{"nocloud", "configdrive"}
	CDROMBuses = []string{"auto", "sata", "ide", "scsi"}
	LogFormats = []string{"text", "json"}
	LogLevels  = []string{"debug", "info", "warn", "error"}
	// HookFailures are the values of hook_failure.
	HookFailures = []string{"refuse", "boot"}
)

// Default returns the built-in defaults.
func Default() Config {
	return Config{
		LibvirtURI:     "qemu:///system",
		SpoolDir:       "/var/spool/vmpayload",
		PayloadDir:     "/var/run/payload",
		Socket:         "/run/vmpayload/vmpayload.sock",
		SecretsDir:     "/etc/vmpayload/secrets",
		Workers:        4,
		DefaultFormat:  "nocloud",
		CDROMBus:       "auto",
		ImageModeOctal: "0640",
		LogFormat:      "text",
		LogLevel:       "info",
		RescanInterval: 30 * time.Second,
		QueueLimit:     10000,
		HookTimeout:    20 * time.Second,
		HookFailure:    "refuse",
		// A healthy but slow libvirtd answers a define in seconds, and in
		// close to a minute while it re-probes QEMU binaries (after an
		// upgrade); two minutes leave room for that and still free a
		// worker held by a hung libvirtd (wedged storage or QEMU monitor).
		LibvirtTimeout: DefaultLibvirtTimeout,
		GuestReport:    true,
		// TCG guests here finish cloud-init in 1-3 minutes; a slow
		// first boot (package installs) takes longer.
		GuestTimeout: DefaultGuestTimeout,
		// A month of results, and at most 10000 per directory: enough to
		// look a job up long after it ran, and a bound on the disk and on
		// the start-up scan of done/ (about 2 KB per result).
		ResultRetentionCount: DefaultResultRetentionCount,
		ResultRetentionAge:   DefaultResultRetentionAge,
		// 1024 connections (one descriptor, ~20 KB each) fit LimitNOFILE
		// 8192 of the packaged unit with the workers' share to spare
		// (docs/reliability.md, "Connection caps").
		MaxConnections:            1024,
		MaxConnectionsPerUID:      64,
		MaxEventSubscribers:       256,
		MaxEventSubscribersPerUID: 16,
	}
}

// key describes one configuration key: its name and how to reach its field.
type key struct {
	name  string // YAML key; the flag is the same with dashes
	usage string
	ptr   func(c *Config) any // *string, *int or *time.Duration
}

// keys lists every key in the order of the Config fields.
var keys = []key{
	{"libvirt_uri", "libvirt connection URI", func(c *Config) any { return &c.LibvirtURI }},
	{"spool_dir", "directory watched for job files", func(c *Config) any { return &c.SpoolDir }},
	{"payload_dir", "directory of built payload images", func(c *Config) any { return &c.PayloadDir }},
	{"socket", "path of the API unix socket", func(c *Config) any { return &c.Socket }},
	{"socket_group", "group of the API socket, name or gid (empty: keep)", func(c *Config) any { return &c.SocketGroup }},
	{"secrets_dir", "directory secret references resolve against", func(c *Config) any { return &c.SecretsDir }},
	{"workers", "number of jobs run concurrently (1..256)", func(c *Config) any { return &c.Workers }},
	{"default_format", "payload format of jobs that name none: nocloud or configdrive", func(c *Config) any { return &c.DefaultFormat }},
	{"cdrom_bus", "bus of the payload drive (CD-ROM, or a vfat disk where the bus can carry one): auto, sata, ide or scsi", func(c *Config) any { return &c.CDROMBus }},
	{"image_mode", "permission of payload images, octal", func(c *Config) any { return &c.ImageModeOctal }},
	{"image_group", "group of payload images, name or gid (empty: keep)", func(c *Config) any { return &c.ImageGroup }},
	{"log_format", "log format: text or json", func(c *Config) any { return &c.LogFormat }},
	{"log_level", "log level: debug, info, warn or error", func(c *Config) any { return &c.LogLevel }},
	{"rescan_interval", "interval of spool directory rescans (extension)", func(c *Config) any { return &c.RescanInterval }},
	{"queue_limit", "most jobs waiting for a worker (extension)", func(c *Config) any { return &c.QueueLimit }},
	{"hook_timeout", "longest run of the libvirt hook before it counts as failed", func(c *Config) any { return &c.HookTimeout }},
	{"hook_failure", "what a failed hook run does: refuse (the start fails) or boot (boots without payload)", func(c *Config) any { return &c.HookFailure }},
	{"admin_group", "group allowed privileged job fields (domain_xml, prebuilt_image) besides root, name or gid (empty: root only)", func(c *Config) any { return &c.AdminGroup }},
	{"spool_group", "group allowed to drop jobs into the spool and read their own results, name or gid (empty: root only)", func(c *Config) any { return &c.SpoolGroup }},
	{"prebuilt_dirs", "directories prebuilt_image may come from, \":\"-separated (empty: prebuilt_image disabled)", func(c *Config) any { return &c.PrebuiltDirs }},
	{"libvirt_timeout", "longest wait for one libvirt call before its job fails with libvirt_timeout", func(c *Config) any { return &c.LibvirtTimeout }},
	{"guest_report", "default of a job's guest_report: cloud-init's outcome reported back over a virtio-serial channel", func(c *Config) any { return &c.GuestReport }},
	{"guest_timeout", "longest wait for a guest's first report after its domain started", func(c *Config) any { return &c.GuestTimeout }},
	{"result_retention_count", "most results kept in each of done/ and failed/, oldest removed first (0: no limit)", func(c *Config) any { return &c.ResultRetentionCount }},
	{"result_retention_age", "how long results in done/ and failed/ are kept (0: forever)", func(c *Config) any { return &c.ResultRetentionAge }},
	{"max_connections", "most API socket connections open at once; max_connections_per_uid of them are kept for root", func(c *Config) any { return &c.MaxConnections }},
	{"max_connections_per_uid", "most API socket connections one non-root uid may hold (less than half of max_connections)", func(c *Config) any { return &c.MaxConnectionsPerUID }},
	{"max_event_subscribers", "most GET /v1/events streams open at once; max_event_subscribers_per_uid of them are kept for root", func(c *Config) any { return &c.MaxEventSubscribers }},
	{"max_event_subscribers_per_uid", "most GET /v1/events streams one non-root uid may hold (less than half of max_event_subscribers)", func(c *Config) any { return &c.MaxEventSubscribersPerUID }},
}

// FlagName returns the command-line flag name of a configuration key.
func FlagName(key string) string { return strings.ReplaceAll(key, "_", "-") }

// Load reads the YAML file at path over the defaults. Decoding is strict:
// unknown keys, duplicate keys and values of the wrong type are errors that
// name the key and its line; all of them are reported together. An empty
// file, or path "", gives the defaults; a key with an empty (null) value
// keeps its default. On error Load returns Default() with the error. Load does
// not call Validate.
func Load(path string) (Config, error) {
	c := Default()
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if err := decode(data, &c); err != nil {
		return Default(), fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// lineRe matches the "line N: " prefix of yaml.v3 error messages.
var lineRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^line (\d+): (.*)$`) })

// notFoundRe matches yaml.v3's message for an unknown key.
var notFoundRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^field (.*) not found in type `) })

// decode decodes one YAML document over c.
func decode(data []byte, c *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(c)
	if errors.Is(err, io.EOF) {
		return nil // empty file
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return typeErrors(data, te)
	}
	if err != nil {
		return fmt.Errorf("invalid YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return fmt.Errorf("invalid YAML: %w", err)
		}
		return fmt.Errorf("line %d: more than one YAML document", extra.Line)
	}
	return nil
}

// typeErrors rewrites yaml.v3's type errors so that each names its key.
func typeErrors(data []byte, te *yaml.TypeError) error {
	// Map the line of each top-level key and value to the key's name.
	byLine := map[int]string{}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		m := doc.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			for _, line := range []int{k.Line, v.Line} {
				if old, ok := byLine[line]; ok && old != k.Value {
					byLine[line] = "" // ambiguous: two keys on one line
				} else {
					byLine[line] = k.Value
				}
			}
		}
	}
	errs := make([]error, 0, len(te.Errors))
	for _, msg := range te.Errors {
		sub := lineRe().FindStringSubmatch(msg)
		if sub == nil {
			errs = append(errs, errors.New(msg))
			continue
		}
		line, rest := sub[1], sub[2]
		if f := notFoundRe().FindStringSubmatch(rest); f != nil {
			errs = append(errs, fmt.Errorf("line %s: unknown key %q", line, f[1]))
			continue
		}
		n, _ := strconv.Atoi(line)
		if name := byLine[n]; name != "" && !strings.Contains(rest, "already defined") {
			errs = append(errs, fmt.Errorf("line %s: %s: %s", line, name, rest))
			continue
		}
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}

// RegisterFlags defines one flag per key on fs, named after the key with
// dashes (--libvirt-uri ...), bound to c's fields and defaulting to c's
// current values.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	for _, k := range keys {
		name := FlagName(k.name)
		switch p := k.ptr(c).(type) {
		case *string:
			fs.StringVar(p, name, *p, k.usage)
		case *int:
			fs.IntVar(p, name, *p, k.usage)
		case *time.Duration:
			fs.DurationVar(p, name, *p, k.usage)
		case *bool:
			fs.BoolVar(p, name, *p, k.usage)
		default:
			panic(fmt.Sprintf("config: key %s has unsupported type %T", k.name, p))
		}
	}
}

// Resolve parses args with fs and returns the effective configuration:
// defaults, overridden by the file named by --config, overridden by the
// flags explicitly set in args. Resolve defines --config and the key flags
// on fs unless they are already defined there (for example by an earlier
// RegisterFlags). When --config is not given, DefaultPath is read if it
// exists; --config "" means no file. The result is validated; on a
// validation error the Config is returned along with the error.
func Resolve(fs *flag.FlagSet, args []string) (Config, error) {
	if fs.Lookup("config") == nil {
		fs.String("config", DefaultPath, "configuration file (YAML; empty: built-in defaults only)")
	}
	if fs.Lookup(FlagName(keys[0].name)) == nil {
		d := Default()
		d.RegisterFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	set := map[string]*flag.Flag{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f })

	path := fs.Lookup("config").Value.String()
	if _, explicit := set["config"]; !explicit && path == DefaultPath {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			path = ""
		}
	}
	c, err := Load(path)
	if err != nil {
		return c, err
	}
	for _, k := range keys {
		f, ok := set[FlagName(k.name)]
		if !ok {
			continue
		}
		if err := setString(k.ptr(&c), f.Value.String()); err != nil {
			return c, fmt.Errorf("config: flag --%s: %w", f.Name, err)
		}
	}
	return c, c.Validate()
}

// setString parses s into the field p points to.
func setString(p any, s string) error {
	switch p := p.(type) {
	case *string:
		*p = s
	case *int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("invalid integer %q: %w", s, err)
		}
		*p = n
	case *time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q: %w", s, err)
		}
		*p = d
	case *bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("invalid boolean %q: %w", s, err)
		}
		*p = b
	default:
		return fmt.Errorf("unsupported type %T", p)
	}
	return nil
}

// groupRe is what Validate accepts as a group name.
var groupRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*\$?$`) })

// Validate checks every key and reports all bad ones together
// (errors.Join), each naming the key and quoting the value.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, value, why string) {
		errs = append(errs, fmt.Errorf("%s: invalid value %q: %s", key, value, why))
	}
	oneOf := func(key, value string, allowed []string) {
		if !slices.Contains(allowed, value) {
			bad(key, value, "want "+strings.Join(allowed, ", "))
		}
	}
	path := func(key, value string) {
		switch {
		case value == "":
			bad(key, value, "must not be empty")
		case strings.ContainsRune(value, 0):
			bad(key, value, "contains a NUL byte")
		}
	}
	group := func(key, value string) {
		if value == "" {
			return
		}
		if value[0] >= '0' && value[0] <= '9' {
			if _, err := parseGID(value); err != nil {
				bad(key, value, "not a valid gid")
			}
			return
		}
		if !groupRe().MatchString(value) || len(value) > 256 {
			bad(key, value, "not a valid group name or gid")
		}
	}

	if u, err := url.Parse(c.LibvirtURI); c.LibvirtURI == "" || err != nil || u.Scheme == "" {
		bad("libvirt_uri", c.LibvirtURI, "want a libvirt URI such as qemu:///system")
	}
	path("spool_dir", c.SpoolDir)
	path("payload_dir", c.PayloadDir)
	path("socket", c.Socket)
	if len(c.Socket) > maxSocketPath {
		bad("socket", c.Socket, fmt.Sprintf("longer than %d bytes, the unix socket path limit", maxSocketPath))
	}
	group("socket_group", c.SocketGroup)
	path("secrets_dir", c.SecretsDir)
	inRange(bad, "workers", c.Workers, MinWorkers, MaxWorkers)
	oneOf("default_format", c.DefaultFormat, Formats)
	oneOf("cdrom_bus", c.CDROMBus, CDROMBuses)
	if _, err := parseMode(c.ImageModeOctal); err != nil {
		bad("image_mode", c.ImageModeOctal, err.Error())
	}
	group("image_group", c.ImageGroup)
	oneOf("log_format", c.LogFormat, LogFormats)
	oneOf("log_level", c.LogLevel, LogLevels)
	if c.RescanInterval < MinRescanInterval {
		bad("rescan_interval", c.RescanInterval.String(), "want at least "+MinRescanInterval.String())
	}
	inRange(bad, "queue_limit", c.QueueLimit, 1, MaxQueueLimit)
	inRange(bad, "hook_timeout", c.HookTimeout, MinHookTimeout, MaxHookTimeout)
	oneOf("hook_failure", c.HookFailure, HookFailures)
	group("admin_group", c.AdminGroup)
	group("spool_group", c.SpoolGroup)
	for _, d := range c.PrebuiltDirList() {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d || strings.ContainsRune(d, 0) || d == "/" {
			bad("prebuilt_dirs", d, "want absolute, clean directory paths other than /, separated by \":\"")
		}
	}
	inRange(bad, "libvirt_timeout", c.LibvirtTimeout, MinLibvirtTimeout, MaxLibvirtTimeout)
	inRange(bad, "guest_timeout", c.GuestTimeout, MinGuestTimeout, MaxGuestTimeout)
	if c.ResultRetentionCount < 0 || c.ResultRetentionCount > MaxResultRetentionCount {
		bad("result_retention_count", strconv.Itoa(c.ResultRetentionCount), fmt.Sprintf("want 0 (no limit) or 1..%d", MaxResultRetentionCount))
	}
	if a := c.ResultRetentionAge; a != 0 && (a < MinResultRetentionAge || a > MaxResultRetentionAge) {
		bad("result_retention_age", a.String(), fmt.Sprintf("want 0 (forever) or %s..%s", MinResultRetentionAge, MaxResultRetentionAge))
	}
	// A cap and its per-uid cap: the per-uid one is under half the cap, so
	// that one uid at its cap leaves the reserve kept for root (the per-uid
	// cap again) and room for other uids.
	caps := func(key string, n int, perKey string, per int) {
		ok := n >= MinMaxConnections && n <= MaxMaxConnections
		if !ok {
			bad(key, strconv.Itoa(n), fmt.Sprintf("want %d..%d", MinMaxConnections, MaxMaxConnections))
		}
		if per < 1 || ok && 2*per >= n {
			bad(perKey, strconv.Itoa(per), fmt.Sprintf("want 1..%d (less than half of %s %d: as many again are kept for root, the rest for other uids)", max((n-1)/2, 1), key, n))
		}
	}
	caps("max_connections", c.MaxConnections, "max_connections_per_uid", c.MaxConnectionsPerUID)
	caps("max_event_subscribers", c.MaxEventSubscribers, "max_event_subscribers_per_uid", c.MaxEventSubscribersPerUID)
	if c.MaxEventSubscribers > c.MaxConnections && c.MaxConnections >= MinMaxConnections {
		bad("max_event_subscribers", strconv.Itoa(c.MaxEventSubscribers), fmt.Sprintf("want at most max_connections %d (each stream is a connection)", c.MaxConnections))
	}
	return errors.Join(errs...)
}

// inRange reports key's value v to bad unless it is within lo..hi.
func inRange[T int | time.Duration](bad func(key, value, why string), key string, v, lo, hi T) {
	if v < lo || v > hi {
		bad(key, fmt.Sprint(v), fmt.Sprintf("want %v..%v", lo, hi))
	}
}

// parseMode parses an octal permission string such as "0640" or "0o640".
func parseMode(s string) (os.FileMode, error) {
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O")
	n, err := strconv.ParseUint(digits, 8, 32) // "" too is an error
	if err != nil {
		return 0, errors.New("want an octal permission such as 0640")
	}
	if n > 0o777 {
		return 0, errors.New("want permission bits only (at most 0777)")
	}
	return os.FileMode(n), nil
}

// parseGID parses a numeric group id.
func parseGID(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return 0, fmt.Errorf("invalid gid %q: %w", s, err)
	}
	return int(n), nil
}

// ImageMode returns the permission of payload images. It returns 0640 if
// image_mode is invalid (Validate reports that).
func (c Config) ImageMode() os.FileMode {
	m, err := parseMode(c.ImageModeOctal)
	if err != nil {
		return 0o640
	}
	return m
}

// ImageGID returns the gid payload images are given, or -1 when image_group
// is empty (keep). Group names are looked up with os/user.
func (c Config) ImageGID() (int, error) { return lookupGID("image_group", c.ImageGroup) }

// PrebuiltDirList returns prebuilt_dirs as a list (empty elements dropped).
func (c Config) PrebuiltDirList() []string {
	var dirs []string
	for _, d := range strings.Split(c.PrebuiltDirs, ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// SpoolGID returns the gid of spool_group, or -1 when it is empty (root
// only).
func (c Config) SpoolGID() (int, error) { return lookupGID("spool_group", c.SpoolGroup) }

// AdminGID returns the gid of admin_group, or -1 when it is empty (root
// only).
func (c Config) AdminGID() (int, error) { return lookupGID("admin_group", c.AdminGroup) }

// SocketGID returns the gid the API socket is given, or -1 when
// socket_group is empty (keep). Group names are looked up with os/user.
func (c Config) SocketGID() (int, error) { return lookupGID("socket_group", c.SocketGroup) }

// lookupGID resolves a group name or numeric gid; "" is -1.
func lookupGID(key, group string) (int, error) {
	if group == "" {
		return -1, nil
	}
	if group[0] >= '0' && group[0] <= '9' {
		gid, err := parseGID(group)
		if err != nil {
			return -1, fmt.Errorf("%s: %w", key, err)
		}
		return gid, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", key, err)
	}
	gid, err := parseGID(g.Gid)
	if err != nil {
		return -1, fmt.Errorf("%s: group %q: %w", key, group, err)
	}
	return gid, nil
}

// Logger returns a logger writing to w in the configured format at the
// configured level.
func (c Config) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level // LogLevels are slog's level names
	if !slices.Contains(LogLevels, c.LogLevel) || level.UnmarshalText([]byte(c.LogLevel)) != nil {
		return nil, fmt.Errorf("log_level: invalid value %q: want %s", c.LogLevel, strings.Join(LogLevels, ", "))
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.LogFormat {
	case "text":
		text := slog.NewTextHandler(w, opts)
		// Under systemd, with standard error going to the journal: the
		// native protocol, so the attributes become journal fields.
		if f, ok := w.(*os.File); ok && journal.OnStream(f) {
			if h, err := journal.New("vmpayload", level, text); err == nil {
				return slog.New(h), nil
			}
		}
		return slog.New(text), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log_format: invalid value %q: want %s", c.LogFormat, strings.Join(LogFormats, ", "))
	}
}

// YAML returns the configuration as a YAML document with every key, in the
// form Load reads back (for --print-config).
func (c Config) YAML() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("config: encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: encode YAML: %w", err)
	}
	return buf.Bytes(), nil
}
