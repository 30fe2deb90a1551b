package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// testDomainXML is a small domain definition with a fixed UUID.
const testDomainXML = `<domain type='qemu'>
  <name>hooktest</name>
  <uuid>6f1c1a8e-55b0-4a4e-9d1e-3c1f0b8a9e01</uuid>
  <memory unit='MiB'>48</memory>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
  </os>
  <devices/>
</domain>`

// testJob uses a password secret, so a vanished secret can be tested.
const testJob = `{"version":1,"domain":"hooktest","hostname":"hooktest","users":[{"name":"ops","password_secret":"pw"}]}`

// hookFixture is a payload dir, secrets dir, config and a domain XML with a
// recipe made by "vmpayload recipe --domain-xml".
type hookFixture struct {
	dir, payloadDir, secretsDir, config string
	domainXML                           string
	image, sha256                       string
}

func newHookFixture(t testing.TB) *hookFixture { return newHookFixtureJob(t, testJob) }

// newHookFixtureJob is newHookFixture for the job document jobText.
func newHookFixtureJob(t testing.TB, jobText string) *hookFixture {
	t.Helper()
	f := &hookFixture{dir: t.TempDir()}
	f.payloadDir = filepath.Join(f.dir, "payload")
	f.secretsDir = filepath.Join(f.dir, "secrets")
	must(t, os.MkdirAll(f.secretsDir, 0o700))
	must(t, os.WriteFile(filepath.Join(f.secretsDir, "pw"), []byte("s3cret\n"), 0o600))
	jobPath := filepath.Join(f.dir, "job.json")
	must(t, os.WriteFile(jobPath, []byte(jobText), 0o600))
	domPath := filepath.Join(f.dir, "dom.xml")
	must(t, os.WriteFile(domPath, []byte(testDomainXML), 0o600))
	f.config = f.writeConfig(t, "")

	code, out, stderr := runCLI(t, "recipe", "--payload-dir", f.payloadDir, "--secrets-dir", f.secretsDir, "--domain-xml", domPath, jobPath)
	if code != 0 {
		t.Fatalf("recipe: exit %d: %s", code, stderr)
	}
	f.domainXML = out
	r, ok, err := recipe.FromDomainXML(out)
	if err != nil || !ok {
		t.Fatalf("recipe output has no recipe: %v %v\n%s", ok, err, out)
	}
	f.image, f.sha256 = r.Path, r.SHA256
	if got := testenv.SumOf(f.image); got != f.sha256 {
		t.Fatalf("built image sha256 %s, recipe %s", got, f.sha256)
	}
	return f
}

// writeConfig writes an agent.yaml for the fixture with extra lines added.
// withoutRecipe is the fixture's domain XML with the recipe taken out (a
// domain restored from a save made before the agent).
func (f *hookFixture) withoutRecipe(t *testing.T) string {
	t.Helper()
	ed, err := domxml.NewEdit(f.domainXML)
	must(t, err)
	_, err = ed.RemoveMetadata(recipe.Namespace)
	must(t, err)
	x, err := ed.XML()
	must(t, err)
	return x
}

func (f *hookFixture) writeConfig(t testing.TB, extra string) string {
	t.Helper()
	fh, err := os.CreateTemp(f.dir, "agent-*.yaml")
	must(t, err)
	defer fh.Close()
	_, err = fh.WriteString("payload_dir: " + f.payloadDir + "\nsecrets_dir: " + f.secretsDir + "\n" + extra)
	must(t, err)
	return fh.Name()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// failReader fails the test when the hook reads stdin.
type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Error("the hook read stdin")
	return 0, io.EOF
}

// blockReader blocks until its channel is closed.
type blockReader chan struct{}

func (r blockReader) Read([]byte) (int, error) {
	<-r
	return 0, io.EOF
}

// runHookCLI runs "vmpayload hook" in-process with stdin and captures the
// syslog lines.
func runHookCLI(t *testing.T, stdin io.Reader, args ...string) (code int, stdout, stderr string, logged []string) {
	t.Helper()
	oldIn, oldLog := hookStdin, hookSyslog
	t.Cleanup(func() { hookStdin, hookSyslog = oldIn, oldLog })
	hookStdin = stdin
	hookSyslog = func(line string) { logged = append(logged, line) }
	var out, errb bytes.Buffer
	code = run(append([]string{"hook"}, args...), &out, &errb)
	return code, out.String(), errb.String(), logged
}

func TestHook(t *testing.T) {
	f := newHookFixture(t)
	otherDir := filepath.Join(f.dir, "other-payload")
	otherCfg := filepath.Join(f.dir, "other.yaml")
	must(t, os.WriteFile(otherCfg, []byte("payload_dir: "+otherDir+"\nsecrets_dir: "+f.secretsDir+"\n"), 0o600))
	bootCfg := f.writeConfig(t, "hook_failure: boot\n")
	noRecipe := f.withoutRecipe(t)
	hidePW := func(t *testing.T) {
		p := filepath.Join(f.secretsDir, "pw")
		must(t, os.Rename(p, p+".away"))
		t.Cleanup(func() { _ = os.Rename(p+".away", p) })
	}
	removeImage := func(t *testing.T) { _ = os.Remove(f.image) }

	tests := []struct {
		name    string
		config  string
		args    []string // after the config flag
		stdin   func(t *testing.T) io.Reader
		setup   func(t *testing.T)
		code    int
		stderr  string // substring; "" means stderr must be empty
		logged  int    // syslog lines
		outcome string // "rebuilt", "intact", "missing" (image state afterwards)
	}{
		{name: "no recipe", args: []string{"hooktest", "prepare", "begin", "-"},
			stdin: func(*testing.T) io.Reader { return strings.NewReader(noRecipe) }, setup: removeImage, code: 0, outcome: "missing"},
		// A restore or incoming migration whose XML dropped the recipe but
		// names a missing payload image would resume the guest with its
		// drive emptied under it: refused (or, under boot, logged).
		{name: "restore without recipe, image missing, refuse", args: []string{"hooktest", "restore", "begin", "-"},
			stdin: func(*testing.T) io.Reader { return strings.NewReader(noRecipe) }, setup: removeImage, code: 1,
			stderr: "is missing and the domain XML given to the restore carries no recipe to rebuild it", outcome: "missing"},
		{name: "migrate without recipe, image missing, refuse", args: []string{"hooktest", "migrate", "begin", "-"},
			stdin: func(*testing.T) io.Reader { return strings.NewReader(noRecipe) }, setup: removeImage, code: 1,
			stderr: "given to the migrate carries no recipe", outcome: "missing"},
		{name: "restore without recipe, image missing, boot", config: bootCfg, args: []string{"hooktest", "restore", "begin", "-"},
			stdin: func(*testing.T) io.Reader { return strings.NewReader(noRecipe) }, setup: removeImage, code: 0,
			stderr: "hook_failure: boot", logged: 1, outcome: "missing"},
		{name: "restore without recipe, image present", args: []string{"hooktest", "restore", "begin", "-"},
			stdin: func(*testing.T) io.Reader { return strings.NewReader(noRecipe) }, code: 0, outcome: "intact"},
		{name: "restore without recipe, image outside the payload dir", config: otherCfg, args: []string{"hooktest", "restore", "begin", "-"},
			stdin: func(*testing.T) io.Reader { return strings.NewReader(noRecipe) }, setup: removeImage, code: 0, outcome: "missing"},
		{name: "other op is not read", args: []string{"hooktest", "stopped", "end", "-"},
			stdin: func(t *testing.T) io.Reader { return failReader{t} }, setup: removeImage, code: 0, outcome: "missing"},
		{name: "start begin is not read", args: []string{"hooktest", "start", "begin", "-"},
			stdin: func(t *testing.T) io.Reader { return failReader{t} }, code: 0},
		{name: "reconnect begin is not read", args: []string{"hooktest", "reconnect", "begin", "-"},
			stdin: func(t *testing.T) io.Reader { return failReader{t} }, code: 0},
		{name: "missing image is rebuilt", args: []string{"hooktest", "prepare", "begin", "-"},
			setup: removeImage, code: 0, logged: 1, outcome: "rebuilt"},
		{name: "migrate begin rebuilds", args: []string{"hooktest", "migrate", "begin", "-"},
			setup: removeImage, code: 0, logged: 1, outcome: "rebuilt"},
		{name: "restore begin rebuilds", args: []string{"hooktest", "restore", "begin", "-"},
			setup: removeImage, code: 0, logged: 1, outcome: "rebuilt"},
		{name: "intact image", args: []string{"hooktest", "prepare", "begin", "-"}, code: 0, outcome: "intact"},
		{name: "damaged image is replaced", args: []string{"hooktest", "prepare", "begin", "-"},
			setup: func(t *testing.T) { must(t, os.WriteFile(f.image, []byte("garbage"), 0o640)) }, code: 0, logged: 1, outcome: "rebuilt"},
		{name: "path outside the payload dir is refused", config: otherCfg, args: []string{"hooktest", "prepare", "begin", "-"},
			setup: removeImage, code: 1, stderr: "refused: the path is not directly inside the payload directory", outcome: "missing"},
		{name: "vanished secret, refuse", args: []string{"hooktest", "prepare", "begin", "-"},
			setup: func(t *testing.T) { removeImage(t); hidePW(t) }, code: 1, stderr: `secret "pw" does not exist`, outcome: "missing"},
		{name: "vanished secret, boot", config: bootCfg, args: []string{"hooktest", "prepare", "begin", "-"},
			setup: func(t *testing.T) { removeImage(t); hidePW(t) }, code: 0, stderr: "hook_failure: boot", logged: 1, outcome: "missing"},
		{name: "bad recipe is refused", args: []string{"hooktest", "prepare", "begin", "-"},
			stdin: func(*testing.T) io.Reader {
				return strings.NewReader(strings.Replace(f.domainXML, "sha256='", "sha256='zz", 1))
			}, code: 1, stderr: "image@sha256"},
		{name: "missing config file means defaults", config: filepath.Join(f.dir, "nope.yaml"), args: []string{"hooktest", "prepare", "begin", "-"},
			code: 1, stderr: "/var/run/payload"},
		{name: "invalid config refuses", config: f.writeConfig(t, "hook_failure: maybe\n"), args: []string{"hooktest", "prepare", "begin", "-"},
			code: 1, stderr: "hook_failure"},
		{name: "domain name starting with a dash", args: []string{"--", "-odd", "prepare", "begin", "-"}, code: 0, outcome: "intact"},
		{name: "too few arguments", args: []string{"hooktest"}, code: 2, stderr: "Usage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// start each case with the image in place
			if testenv.SumOf(f.image) != f.sha256 {
				if code, _, se, _ := runHookCLI(t, strings.NewReader(f.domainXML), "--config", f.config, "h", "prepare", "begin", "-"); code != 0 {
					t.Fatalf("restoring the image: %d %s", code, se)
				}
			}
			var before os.FileInfo
			before, _ = os.Stat(f.image)
			if tc.setup != nil {
				tc.setup(t)
			}
			cfg := f.config
			if tc.config != "" {
				cfg = tc.config
			}
			var stdin io.Reader = strings.NewReader(f.domainXML)
			if tc.stdin != nil {
				stdin = tc.stdin(t)
			}
			code, stdout, stderr, logged := runHookCLI(t, stdin, append([]string{"--config", cfg}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing (libvirt would take it as the new XML)", stdout)
			}
			switch {
			case tc.stderr == "" && stderr != "":
				t.Errorf("stderr %q, want nothing", stderr)
			case tc.stderr != "" && !strings.Contains(stderr, tc.stderr):
				t.Errorf("stderr %q lacks %q", stderr, tc.stderr)
			case tc.stderr != "" && tc.code != 2 && strings.Count(stderr, "\n") != 1:
				t.Errorf("stderr is not one line: %q", stderr)
			}
			if len(logged) != tc.logged {
				t.Errorf("syslog lines %q, want %d", logged, tc.logged)
			}
			switch tc.outcome {
			case "missing":
				if _, err := os.Lstat(f.image); err == nil {
					t.Errorf("image exists, want it missing")
				}
			case "rebuilt", "intact":
				if got := testenv.SumOf(f.image); got != f.sha256 {
					t.Errorf("image sha256 %q, want the recorded %s", got, f.sha256)
				}
				if tc.outcome == "intact" {
					after, err := os.Stat(f.image)
					if err != nil || before == nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
						t.Errorf("intact image was rewritten")
					}
				}
			}
		})
	}
}

func TestHookTimeout(t *testing.T) {
	f := newHookFixture(t)
	for _, tc := range []struct {
		policy string
		code   int
	}{{"refuse", 1}, {"boot", 0}} {
		t.Run(tc.policy, func(t *testing.T) {
			cfg := f.writeConfig(t, "hook_timeout: 300ms\nhook_failure: "+tc.policy+"\n")
			stuck := make(blockReader)
			defer close(stuck)
			t0 := time.Now()
			code, stdout, stderr, _ := runHookCLI(t, stuck, "--config", cfg, "hooktest", "prepare", "begin", "-")
			took := time.Since(t0)
			if code != tc.code || stdout != "" || !strings.Contains(stderr, "gave up after 300ms (hook_timeout)") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d stdout %q stderr %q", code, stdout, stderr)
			}
			if took < 300*time.Millisecond || took > 3*time.Second { // timeout + at most 1 s for cleanup
				t.Errorf("took %s, want 300ms..1.3s", took)
			}
		})
	}
}

func TestRecipeWithoutDomainXML(t *testing.T) {
	f := newHookFixture(t)
	jobPath := filepath.Join(f.dir, "job.json")
	drive := filepath.Join(f.dir, "drive.xml")
	code, out, stderr := runCLI(t, "recipe", "--payload-dir", f.payloadDir, "--secrets-dir", f.secretsDir, "--drive-file", drive, jobPath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	el := strings.TrimSpace(out)
	// the form virsh metadata --set takes: no prefix, no namespace
	// declaration (TestLibvirtdRecipeMetadataSet gives it to libvirt)
	if strings.Count(el, "\n") != 0 || !strings.HasPrefix(el, "<recipe ") || strings.Contains(el, "xmlns:") {
		t.Fatalf("stdout is not the one-line recipe element for virsh metadata --set: %q", out)
	}
	r, ok, err := recipeOfMetadataContent(el)
	if err != nil || !ok {
		t.Fatalf("recipe element does not parse: %v", err)
	}
	if want := filepath.Join(f.payloadDir, "hooktest-"); !strings.HasPrefix(r.Path, want) || testenv.SumOf(r.Path) != r.SHA256 {
		t.Errorf("image %s (want prefix %s) sha256 %s, recipe %s", r.Path, want, testenv.SumOf(r.Path), r.SHA256)
	}
	d, err := os.ReadFile(drive)
	must(t, err)
	if !strings.Contains(string(d), "<source file='"+r.Path+"'") || !strings.Contains(string(d), "ua-vmpayload") {
		t.Errorf("drive XML:\n%s", d)
	}
	// both halves on stdout without --drive-file
	code, out, _ = runCLI(t, "recipe", "--payload-dir", f.payloadDir, "--secrets-dir", f.secretsDir, "--bus", "scsi", jobPath)
	if code != 0 || !strings.Contains(out, "</recipe>\n<disk ") {
		t.Errorf("exit %d, stdout:\n%s", code, out)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"relative payload dir", []string{"--payload-dir", "rel", jobPath}, 2},
		{"bad bus", []string{"--bus", "usb", jobPath}, 2},
		{"bad mode", []string{"--image-mode", "999", jobPath}, 2},
		{"no job", nil, 2},
	} {
		if code, _, _ := runCLI(t, append([]string{"recipe"}, tc.args...)...); code != tc.code {
			t.Errorf("%s: exit %d, want %d", tc.name, code, tc.code)
		}
	}
}

// TestHookFwCfg: the hook rebuilds an Ignition config delivered by fw_cfg
// (issue 34) like an image: at prepare begin and at migrate begin (on the
// destination, before its QEMU reads fw_cfg) a missing or damaged config
// file is written again with the recorded sha256 and nothing is printed
// (libvirt keeps the domain XML); a vanished secret refuses the start.
func TestHookFwCfg(t *testing.T) {
	f := newHookFixtureJob(t, `{"version":1,"domain":"hooktest","format":"ignition","hostname":"hooktest","users":[{"name":"core","password_secret":"pw"}]}`)
	if !strings.HasSuffix(f.image, ".ign") || !strings.Contains(f.domainXML, "<sysinfo type='fwcfg'>") || strings.Contains(f.domainXML, "<disk") {
		t.Fatalf("recipe --domain-xml for a fw_cfg job: config %s\n%s", f.image, f.domainXML)
	}
	for _, c := range []struct {
		name, op string
		setup    func(t *testing.T)
		code     int
		want     string // rebuilt, missing
	}{
		{"prepare begin, config missing", "prepare", func(t *testing.T) { must(t, os.Remove(f.image)) }, 0, "rebuilt"},
		{"migrate begin, config missing", "migrate", func(t *testing.T) { must(t, os.Remove(f.image)) }, 0, "rebuilt"},
		{"prepare begin, config damaged", "prepare", func(t *testing.T) { must(t, os.WriteFile(f.image, []byte("{}"), 0o640)) }, 0, "rebuilt"},
		{"prepare begin, secret gone", "prepare", func(t *testing.T) {
			must(t, os.Remove(f.image))
			p := filepath.Join(f.secretsDir, "pw")
			must(t, os.Rename(p, p+".away"))
			t.Cleanup(func() { _ = os.Rename(p+".away", p) })
		}, 1, "missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.setup(t)
			code, stdout, stderr, _ := runHookCLI(t, strings.NewReader(f.domainXML), "--config", f.config, "--", "hooktest", c.op, "begin", "-")
			if code != c.code || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and no output", code, stdout, stderr, c.code)
			}
			switch c.want {
			case "rebuilt":
				if got := testenv.SumOf(f.image); got != f.sha256 {
					t.Errorf("config sha256 %q after the hook, recorded %s", got, f.sha256)
				}
			case "missing":
				if _, err := os.Lstat(f.image); err == nil {
					t.Error("a config was written although the secret is gone")
				}
				if !strings.Contains(stderr, `secret "pw" does not exist`) {
					t.Errorf("stderr %q", stderr)
				}
			}
		})
	}
}

// recipeOfMetadataContent reads the recipe from the form virsh metadata
// --set takes, placed in a domain as libvirt places it (under the key
// vmpayload in the recipe namespace).
func recipeOfMetadataContent(el string) (*recipe.Recipe, bool, error) {
	prefixed := strings.Replace(el, "<recipe ", "<vmpayload:recipe xmlns:vmpayload=\""+recipe.Namespace+"\" ", 1)
	prefixed = strings.ReplaceAll(prefixed, "<image ", "<vmpayload:image ")
	prefixed = strings.ReplaceAll(prefixed, "<job>", "<vmpayload:job>")
	prefixed = strings.ReplaceAll(prefixed, "</job>", "</vmpayload:job>")
	prefixed = strings.ReplaceAll(prefixed, "<sealed ", "<vmpayload:sealed ")
	prefixed = strings.ReplaceAll(prefixed, "</sealed>", "</vmpayload:sealed>")
	prefixed = strings.ReplaceAll(prefixed, "</recipe>", "</vmpayload:recipe>")
	ed, err := domxml.NewEdit(testDomainXML)
	if err == nil {
		err = ed.SetMetadata(recipe.Namespace, prefixed)
	}
	x := ""
	if err == nil {
		x, err = ed.XML()
	}
	if err != nil {
		return nil, false, err
	}
	return recipe.FromDomainXML(x)
}

// TestHookBlockdev: an Ignition config delivered as a block device (issue
// 41) is rebuilt by the hook like every payload: `vmpayload recipe
// --domain-xml` writes the virtio disk with serial "ignition" and the
// recipe, and prepare, migrate and restore begin make a missing or damaged
// config file again byte-identical.
func TestHookBlockdev(t *testing.T) {
	f := newHookFixtureJob(t, `{"version":1,"domain":"hooktest","format":"ignition","ignition_delivery":"blockdev","hostname":"hooktest","users":[{"name":"core","password_secret":"pw"}]}`)
	if !strings.HasSuffix(f.image, ".ign") || strings.Contains(f.domainXML, "<sysinfo") || !strings.Contains(f.domainXML, "<serial>ignition</serial>") || !strings.Contains(f.domainXML, "bus='virtio'") {
		t.Fatalf("recipe --domain-xml for a blockdev job: config %s\n%s", f.image, f.domainXML)
	}
	for _, c := range []struct {
		name, op string
		setup    func(t *testing.T)
	}{
		{"prepare begin, config missing", "prepare", func(t *testing.T) { must(t, os.Remove(f.image)) }},
		{"migrate begin, config missing", "migrate", func(t *testing.T) { must(t, os.Remove(f.image)) }},
		{"restore begin, config missing", "restore", func(t *testing.T) { must(t, os.Remove(f.image)) }},
		{"prepare begin, config damaged", "prepare", func(t *testing.T) { must(t, os.WriteFile(f.image, []byte("{}"), 0o640)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.setup(t)
			code, stdout, stderr, _ := runHookCLI(t, strings.NewReader(f.domainXML), "--config", f.config, "--", "hooktest", c.op, "begin", "-")
			if code != 0 || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and no output", code, stdout, stderr)
			}
			if got := testenv.SumOf(f.image); got != f.sha256 {
				t.Errorf("config sha256 %q after the hook, recorded %s", got, f.sha256)
			}
		})
	}
}

// TestRecipeIgnitionByArchitecture: `vmpayload recipe --domain-xml`
// chooses the Ignition delivery as the agent does (issue 41): a job that
// names none gets the blockdev disk on s390x and ppc64le, fw_cfg on x86;
// fw_cfg asked for on s390x is refused naming ignition_delivery.
func TestRecipeIgnitionByArchitecture(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, arch, machine, delivery string
		code                          int
		want                          string
	}{
		{"s390x default", "s390x", "s390-ccw-virtio", "", 0, "<serial>ignition</serial>"},
		{"ppc64le default", "ppc64le", "pseries", "", 0, "<serial>ignition</serial>"},
		{"x86 default", "x86_64", "pc", "", 0, "<sysinfo type='fwcfg'>"},
		{"s390x fwcfg refused", "s390x", "s390-ccw-virtio", "fwcfg", exitInvalid, `ignition_delivery "fwcfg": the domain's architecture is s390x`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dom := filepath.Join(dir, c.arch+".xml")
			must(t, os.WriteFile(dom, []byte(`<domain type='qemu'><name>r</name><uuid>3b870ec1-d872-4676-a95a-14c1bed80099</uuid><memory unit='MiB'>256</memory><os><type arch='`+c.arch+`' machine='`+c.machine+`'>hvm</type></os><features><acpi/></features><devices/></domain>`), 0o600))
			jb := `{"version":1,"domain":"r","format":"ignition","hostname":"r"`
			if c.delivery != "" {
				jb += `,"ignition_delivery":"` + c.delivery + `"`
			}
			jobPath := filepath.Join(dir, "job.json")
			must(t, os.WriteFile(jobPath, []byte(jb+"}"), 0o600))
			code, out, stderr := runCLI(t, "recipe", "--payload-dir", filepath.Join(dir, "payload"), "--secrets-dir", filepath.Join(dir, "secrets"), "--domain-xml", dom, jobPath)
			if code != c.code || !strings.Contains(out+stderr, c.want) {
				t.Fatalf("exit %d, want %d and %q:\n%s%s", code, c.code, c.want, out, stderr)
			}
			if c.want == "<serial>ignition</serial>" && (strings.Contains(out, "<sysinfo") || !strings.Contains(out, "bus='virtio'")) {
				t.Errorf("blockdev definition:\n%s", out)
			}
		})
	}
}
