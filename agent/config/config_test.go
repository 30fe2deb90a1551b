package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// writeFile writes content to a file in a temporary directory.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func newFS() *flag.FlagSet {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func TestDefault(t *testing.T) {
	d := Default()
	want := Config{
		LibvirtURI: "qemu:///system", SpoolDir: "/var/spool/vmpayload", PayloadDir: "/var/run/payload",
		Socket: "/run/vmpayload/vmpayload.sock", SocketGroup: "", SecretsDir: "/etc/vmpayload/secrets",
		Workers: 4, DefaultFormat: "nocloud", CDROMBus: "auto", ImageModeOctal: "0640", ImageGroup: "",
		LogFormat: "text", LogLevel: "info", RescanInterval: 30 * time.Second, QueueLimit: 10000,
		HookTimeout: 20 * time.Second, HookFailure: "refuse", AdminGroup: "", SpoolGroup: "", PrebuiltDirs: "", LibvirtTimeout: 2 * time.Minute,
		GuestReport: true, GuestTimeout: 15 * time.Minute,
		ResultRetentionCount: 10000, ResultRetentionAge: 720 * time.Hour,
		MaxConnections: 1024, MaxConnectionsPerUID: 64, MaxEventSubscribers: 256, MaxEventSubscribersPerUID: 16,
	}
	if d != want {
		t.Fatalf("Default() = %+v, want %+v", d, want)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if d.ImageMode() != 0o640 {
		t.Errorf("ImageMode = %o", d.ImageMode())
	}
	for _, f := range []func() (int, error){d.ImageGID, d.SocketGID, d.AdminGID, d.SpoolGID} {
		if gid, err := f(); gid != -1 || err != nil {
			t.Errorf("gid of empty group = %d, %v; want -1, nil", gid, err)
		}
	}
}

// TestKeysMatchTags checks that the key table and the yaml tags agree, in
// order, so flags, YAML() and the file cover the same contract.
func TestKeysMatchTags(t *testing.T) {
	typ := reflect.TypeFor[Config]()
	if typ.NumField() != len(keys) {
		t.Fatalf("Config has %d fields, key table %d", typ.NumField(), len(keys))
	}
	var c Config
	for i, k := range keys {
		f := typ.Field(i)
		if tag := f.Tag.Get("yaml"); tag != k.name {
			t.Errorf("field %s: tag %q, key table %q", f.Name, tag, k.name)
		}
		if reflect.ValueOf(k.ptr(&c)).Pointer() != reflect.ValueOf(&c).Elem().Field(i).Addr().Pointer() {
			t.Errorf("key %s points at the wrong field", k.name)
		}
	}
	want := []string{"libvirt_uri", "spool_dir", "payload_dir", "socket", "socket_group", "secrets_dir",
		"workers", "default_format", "cdrom_bus", "image_mode", "image_group", "log_format", "log_level",
		"rescan_interval", "queue_limit", "hook_timeout", "hook_failure", "admin_group", "spool_group", "prebuilt_dirs", "libvirt_timeout", "guest_report", "guest_timeout",
		"result_retention_count", "result_retention_age",
		"max_connections", "max_connections_per_uid", "max_event_subscribers", "max_event_subscribers_per_uid"}
	if got := Keys(); !reflect.DeepEqual(got, want) {
		t.Errorf("Keys() = %v, want %v", got, want)
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    func(c *Config) // edits to Default()
		wantErr []string        // substrings that must all appear
	}{
		{name: "empty file", file: "", want: func(*Config) {}},
		{name: "comments only", file: "# nothing\n", want: func(*Config) {}},
		{name: "overrides", file: "libvirt_uri: test:///default\nworkers: 9\nimage_mode: \"0600\"\n" +
			"rescan_interval: 1m30s\nqueue_limit: 5\nimage_group: \"107\"\n",
			want: func(c *Config) {
				c.LibvirtURI, c.Workers, c.ImageModeOctal = "test:///default", 9, "0600"
				c.RescanInterval, c.QueueLimit, c.ImageGroup = 90*time.Second, 5, "107"
			}},
		{name: "unquoted octal mode keeps its text", file: "image_mode: 0750\n",
			want: func(c *Config) { c.ImageModeOctal = "0750" }},
		{name: "null keeps default", file: "workers:\nsocket_group: ~\n", want: func(*Config) {}},
		{name: "unknown key", file: "workers: 2\nworker: 3\n",
			wantErr: []string{`line 2: unknown key "worker"`}},
		{name: "unknown and type errors together", file: "workers: many\nfoo: 1\nrescan_interval: 5x\n",
			wantErr: []string{"line 1: workers: cannot unmarshal", "`many`", `line 2: unknown key "foo"`,
				"line 3: rescan_interval: cannot unmarshal"}},
		{name: "bare number is not a duration", file: "rescan_interval: 30\n",
			wantErr: []string{"line 1: rescan_interval:"}},
		{name: "duplicate key", file: "workers: 2\nworkers: 3\n",
			wantErr: []string{`line 2: mapping key "workers" already defined at line 1`}},
		{name: "not a mapping", file: "- workers\n", wantErr: []string{"line 1: cannot unmarshal !!seq"}},
		{name: "syntax error", file: "workers: [\n", wantErr: []string{"invalid YAML"}},
		{name: "two documents", file: "workers: 2\n---\nworkers: 3\n", wantErr: []string{"more than one YAML document"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.file)
			got, err := Load(path)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Load succeeded, want error with %q", tt.wantErr)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("error %q does not name the file", err)
				}
				if got != Default() {
					t.Errorf("Load returned %+v with its error, want Default()", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := Default()
			tt.want(&want)
			if got != want {
				t.Errorf("Load =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestLoadNoPathAndMissingFile(t *testing.T) {
	c, err := Load("")
	if err != nil || c != Default() {
		t.Fatalf(`Load("") = %+v, %v; want defaults`, c, err)
	}
	_, err = Load(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(missing) error = %v, want one wrapping fs.ErrNotExist", err)
	}
}

func TestResolve(t *testing.T) {
	file := writeFile(t, "workers: 8\nlog_level: debug\nspool_dir: /srv/spool\nrescan_interval: 10s\n")
	tests := []struct {
		name string
		args []string
		want func(c *Config)
	}{
		{name: "no file, no flags", args: []string{"--config="}, want: func(*Config) {}},
		{name: "file overrides defaults", args: []string{"--config", file},
			want: func(c *Config) {
				c.Workers, c.LogLevel, c.SpoolDir, c.RescanInterval = 8, "debug", "/srv/spool", 10*time.Second
			}},
		{name: "flags override file", args: []string{"--config", file, "--workers", "2", "--log-level=warn",
			"--rescan-interval", "2s", "--image-mode", "0600"},
			want: func(c *Config) {
				c.Workers, c.LogLevel, c.SpoolDir, c.RescanInterval = 2, "warn", "/srv/spool", 2*time.Second
				c.ImageModeOctal = "0600"
			}},
		{name: "flags without file", args: []string{"--config=", "--libvirt-uri", "test:///default",
			"--queue-limit", "3", "--socket-group", "kvm"},
			want: func(c *Config) { c.LibvirtURI, c.QueueLimit, c.SocketGroup = "test:///default", 3, "kvm" }},
		// A flag set to the default value is still explicit and beats the file.
		{name: "flag equal to default still overrides", args: []string{"--config", file, "--workers=4"},
			want: func(c *Config) {
				c.LogLevel, c.SpoolDir, c.RescanInterval = "debug", "/srv/spool", 10*time.Second
			}},
		{name: "flag before --config", args: []string{"--workers=5", "--config", file},
			want: func(c *Config) {
				c.Workers, c.LogLevel, c.SpoolDir, c.RescanInterval = 5, "debug", "/srv/spool", 10*time.Second
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, preRegistered := range []bool{false, true} {
				fs := newFS()
				if preRegistered {
					// The caller registered the flags itself (bound to its own
					// struct with defaults); Resolve must still apply the file.
					var mine = Default()
					mine.RegisterFlags(fs)
				}
				got, err := Resolve(fs, tt.args)
				if err != nil {
					t.Fatalf("Resolve(pre=%v): %v", preRegistered, err)
				}
				want := Default()
				tt.want(&want)
				if got != want {
					t.Errorf("Resolve(pre=%v) =\n%+v\nwant\n%+v", preRegistered, got, want)
				}
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	bad := writeFile(t, "workers: 0\n")
	unknown := writeFile(t, "wrkers: 2\n")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--config=", "--nope"}, "flag provided but not defined"},
		{"bad int flag", []string{"--config=", "--workers", "x"}, "invalid value"},
		{"missing explicit file", []string{"--config", "/nonexistent/agent.yaml"}, "no such file"},
		{"unknown key in file", []string{"--config", unknown}, `unknown key "wrkers"`},
		{"invalid file value", []string{"--config", bad}, `workers: invalid value "0"`},
		{"invalid flag value", []string{"--config=", "--cdrom-bus", "usb"}, `cdrom_bus: invalid value "usb"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(newFS(), tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Resolve error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	// A flag can repair a bad file value.
	c, err := Resolve(newFS(), []string{"--config", bad, "--workers", "3"})
	if err != nil || c.Workers != 3 {
		t.Fatalf("flag over bad file value: %+v, %v", c, err)
	}
}

func TestRegisterFlags(t *testing.T) {
	c := Default()
	c.Workers = 7
	fs := newFS()
	c.RegisterFlags(fs)
	for _, k := range Keys() {
		if fs.Lookup(strings.ReplaceAll(k, "_", "-")) == nil {
			t.Errorf("no flag for key %s", k)
		}
	}
	if got := fs.Lookup("workers").DefValue; got != "7" {
		t.Errorf("--workers default = %q, want 7 (c's value)", got)
	}
	if got := fs.Lookup("rescan-interval").DefValue; got != "30s" {
		t.Errorf("--rescan-interval default = %q", got)
	}
	if err := fs.Parse([]string{"--payload-dir", "/p", "--workers", "1"}); err != nil {
		t.Fatal(err)
	}
	if c.PayloadDir != "/p" || c.Workers != 1 {
		t.Errorf("flags not bound to c: %+v", c)
	}
}

func TestValidate(t *testing.T) {
	valid := []func(c *Config){
		func(c *Config) { c.LibvirtURI = "qemu+ssh://root@host/system" },
		func(c *Config) { c.LibvirtURI = "test:///default" },
		func(c *Config) { c.Workers = 1 },
		func(c *Config) { c.Workers = 256 },
		func(c *Config) { c.DefaultFormat = "configdrive" },
		func(c *Config) { c.CDROMBus = "scsi" },
		func(c *Config) { c.ImageModeOctal = "0o600" },
		func(c *Config) { c.ImageModeOctal = "644" },
		func(c *Config) { c.ImageGroup, c.SocketGroup = "libvirt-qemu", "107" },
		func(c *Config) { c.LogFormat, c.LogLevel = "json", "error" },
		func(c *Config) { c.RescanInterval = 100 * time.Millisecond },
		func(c *Config) { c.QueueLimit = 1 },
		func(c *Config) { c.HookTimeout, c.HookFailure = 100*time.Millisecond, "boot" },
		func(c *Config) { c.ResultRetentionCount, c.ResultRetentionAge = 0, 0 },
		func(c *Config) { c.ResultRetentionCount, c.ResultRetentionAge = 1, time.Minute },
	}
	for i, edit := range valid {
		c := Default()
		edit(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("valid case %d: %v", i, err)
		}
	}

	// Every key invalid at once: every one must be reported, quoted.
	c := Config{
		LibvirtURI:     "system",
		SpoolDir:       "",
		PayloadDir:     "",
		Socket:         "/" + strings.Repeat("s", 200),
		SocketGroup:    "bad group",
		SecretsDir:     "a\x00b",
		Workers:        257,
		DefaultFormat:  "NoCloud",
		CDROMBus:       "usb",
		ImageModeOctal: "0999",
		ImageGroup:     "99999999999",
		LogFormat:      "xml",
		LogLevel:       "trace",
		RescanInterval: time.Millisecond,
		QueueLimit:     0,
		HookTimeout:    time.Hour,
		HookFailure:    "ignore",
		AdminGroup:     "bad group",
		SpoolGroup:     "9999999999",
		PrebuiltDirs:   "/srv/seeds:relative",
		LibvirtTimeout: 0,
		GuestTimeout:   time.Second,
		// negative, and too short to read a result
		ResultRetentionCount: -1,
		ResultRetentionAge:   time.Second,
		MaxConnections:       2, MaxConnectionsPerUID: 0,
		MaxEventSubscribers: 10, MaxEventSubscribersPerUID: 5,
	}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate succeeded")
	}
	want := []string{
		`libvirt_uri: invalid value "system"`,
		`spool_dir: invalid value ""`,
		`payload_dir: invalid value ""`,
		`socket: invalid value "/sss`,
		`socket_group: invalid value "bad group"`,
		`secrets_dir: invalid value "a\x00b"`,
		`workers: invalid value "257": want 1..256`,
		`default_format: invalid value "NoCloud": want nocloud, configdrive`,
		`cdrom_bus: invalid value "usb": want auto, sata, ide, scsi`,
		`image_mode: invalid value "0999"`,
		`image_group: invalid value "99999999999"`,
		`log_format: invalid value "xml"`,
		`log_level: invalid value "trace"`,
		`rescan_interval: invalid value "1ms"`,
		`queue_limit: invalid value "0"`,
		`hook_timeout: invalid value "1h0m0s"`,
		`hook_failure: invalid value "ignore": want refuse, boot`,
		`admin_group: invalid value "bad group"`,
		`spool_group: invalid value "9999999999"`,
		`prebuilt_dirs: invalid value "relative"`,
		`libvirt_timeout: invalid value "0s": want 1s..1h0m0s`,
		`result_retention_count: invalid value "-1"`,
		`result_retention_age: invalid value "1s": want 0 (forever) or 1m0s..`,
		`guest_timeout: invalid value "1s": want 1m0s..24h0m0s`,
		`max_connections: invalid value "2": want 3..1048576`,
		`max_connections_per_uid: invalid value "0": want 1..1 (less than half of max_connections 2`,
		`max_event_subscribers_per_uid: invalid value "5": want 1..4 (less than half of max_event_subscribers 10`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Errorf("got %d errors, want %d:\n%v", len(lines), len(want), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}

	c = Default()
	c.ImageModeOctal = "01777"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "at most 0777") {
		t.Errorf("mode with sticky bit: %v", err)
	}
}

func TestPrintConfigRoundTrip(t *testing.T) {
	configs := []Config{Default()}
	c := Default()
	c.LibvirtURI, c.SocketGroup, c.ImageGroup = "qemu+tls://h.example/system?no_verify=1", "0123", "kvm"
	c.ImageModeOctal, c.RescanInterval, c.Workers = "0600", 1500*time.Millisecond, 256
	c.SpoolDir = "/srv/spool: with # odd 'chars'"
	c.LogLevel = "debug"
	configs = append(configs, c)
	for i, c := range configs {
		out, err := c.YAML()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range Keys() {
			if !bytes.Contains(out, []byte("\n"+k+": ")) && !bytes.HasPrefix(out, []byte(k+": ")) {
				t.Errorf("case %d: YAML lacks key %s:\n%s", i, k, out)
			}
		}
		back, err := Load(writeFile(t, string(out)))
		if err != nil {
			t.Fatalf("case %d: YAML output does not load: %v\n%s", i, err, out)
		}
		if back != c {
			t.Errorf("case %d: round trip\n%+v\n!=\n%+v\n%s", i, back, c, out)
		}
	}
}

// TestShippedConfig checks that configs/agent.yaml is exactly the defaults
// and documents every key.
func TestShippedConfig(t *testing.T) {
	path := filepath.Join("..", "..", "configs", "agent.yaml")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c != Default() {
		t.Errorf("%s =\n%+v\nwant Default()\n%+v", path, c, Default())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for _, k := range Keys() {
		found := false
		for i, l := range lines {
			if strings.HasPrefix(l, k+":") {
				found = true
				if i == 0 || !strings.HasPrefix(lines[i-1], "#") {
					t.Errorf("key %s has no comment above it", k)
				}
			}
		}
		if !found {
			t.Errorf("%s lacks key %s", path, k)
		}
	}
}

func TestGIDs(t *testing.T) {
	c := Default()
	c.ImageGroup, c.SocketGroup = "0", "4242"
	if gid, err := c.ImageGID(); gid != 0 || err != nil {
		t.Errorf("ImageGID = %d, %v", gid, err)
	}
	if gid, err := c.SocketGID(); gid != 4242 || err != nil {
		t.Errorf("SocketGID = %d, %v", gid, err)
	}
	c.ImageGroup = "no-such-group-vmpayload-test"
	if gid, err := c.ImageGID(); err == nil || gid != -1 || !strings.Contains(err.Error(), "image_group") {
		t.Errorf("unknown group: %d, %v", gid, err)
	}
	var unknown user.UnknownGroupError
	if _, err := c.ImageGID(); !errors.As(err, &unknown) {
		t.Errorf("error %v does not wrap user.UnknownGroupError", err)
	}
	// Look up a group that exists: the group of gid 0.
	if g, err := user.LookupGroupId("0"); err == nil {
		c.SocketGroup = g.Name
		if gid, err := c.SocketGID(); gid != 0 || err != nil {
			t.Errorf("SocketGID(%s) = %d, %v", g.Name, gid, err)
		}
	}
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	c := Default()
	c.LogFormat, c.LogLevel = "json", "warn"
	log, err := c.Logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "job", "j1")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON record: %v\n%s", err, buf.String())
	}
	if rec["msg"] != "shown" || rec["job"] != "j1" || rec["level"] != "WARN" {
		t.Errorf("record = %v", rec)
	}

	buf.Reset()
	c = Default()
	log, err = c.Logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.Info("shown")
	if got := buf.String(); !strings.Contains(got, "level=INFO msg=shown") || strings.Contains(got, "hidden") {
		t.Errorf("text log = %q", got)
	}
	if !log.Enabled(t.Context(), slog.LevelInfo) || log.Enabled(t.Context(), slog.LevelDebug) {
		t.Error("wrong level")
	}

	for _, bad := range []Config{{LogFormat: "text", LogLevel: "loud"}, {LogFormat: "xml", LogLevel: "info"}} {
		if _, err := bad.Logger(io.Discard); err == nil {
			t.Errorf("Logger(%+v) succeeded", bad)
		}
	}
}

func TestPrebuiltDirList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"/srv/seeds", []string{"/srv/seeds"}},
		{"/srv/seeds::/var/lib/seeds:", []string{"/srv/seeds", "/var/lib/seeds"}},
	}
	for _, tt := range tests {
		if got := (Config{PrebuiltDirs: tt.in}).PrebuiltDirList(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("PrebuiltDirList(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// Keys returns the configuration key names in file order.
func Keys() []string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.name
	}
	return names
}
