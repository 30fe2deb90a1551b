package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

// TestLibvirtdCredentials (issue 42) runs jobs of format "credentials"
// through the engine against the shared libvirtd, on a defined domain
// that is never booted (test/e2e boots guests): an SMBIOS job puts OEM
// strings and <smbios mode='sysinfo'/> into the definition, keeping the
// user's own sysinfo and OEM string, and writes no file; an fw_cfg job
// supersedes it (its OEM strings leave) with one 0600 file per credential
// holding exactly the value, named by an entry each; the SMBIOS job back
// removes the fw_cfg entries and files; after the payload directory is
// emptied (a host reboot), start-up rebuilds every credential file from
// the recipe and orphan collection keeps them; bad input is refused by
// field and loses nothing already attached; detach removes entries and
// files. No secret is in the definition, a result or the log.
func TestLibvirtdCredentials(t *testing.T) {
	h, dir := ignHost(t, "cint-creds-")
	sd := t.TempDir()
	const secret = "cint-secret-token-4711"
	if err := os.WriteFile(filepath.Join(sd, "app-token"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := fmt.Sprintf("cint-creds-%d", os.Getpid())
	d := defineReal(t, h, fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>128</memory><vcpu>1</vcpu>
<sysinfo type='smbios'><system><entry name='manufacturer'>Example</entry></system><oemStrings><entry>myapp:role=web</entry></oemStrings></sysinfo>
<os><type arch='x86_64' machine='pc'>hvm</type></os><features><acpi/></features>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator><memballoon model='none'/></devices></domain>`, name))
	var logs bytes.Buffer
	e := &Engine{Host: h, PayloadDir: dir, SecretsDir: sd, ImageMode: 0o644, ImageGID: -1, Bus: domxml.BusAuto,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Starts: &Starts{}, Cleanups: &Cleanups{}}
	inactive := func() string { return virshOut(t, "dumpxml", "--inactive", name) }
	files := func() []string {
		ents, _ := filepath.Glob(filepath.Join(dir, d.UUID+"-*"))
		var out []string
		for _, f := range ents {
			if !strings.Contains(filepath.Base(f), ".owner") && !strings.HasPrefix(filepath.Base(f), ".") {
				out = append(out, f)
			}
		}
		return out
	}
	noSecret := func(what, s string) {
		t.Helper()
		if strings.Contains(s, secret) {
			t.Errorf("the secret is in %s", what)
		}
	}
	check := func(r result.Result) {
		t.Helper()
		js, _ := json.Marshal(r)
		noSecret("the result", string(js))
		noSecret("the definition", inactive())
		noSecret("the log", logs.String())
	}
	oem := regexp.MustCompile(`<entry>io\.systemd\.credential[^<]*</entry>`)

	// 1. SMBIOS
	smbiosJob := fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","format":"credentials","credentials_delivery":"smbios","hostname":"cint1","timezone":"Europe/Berlin","motd":"hello\n"}`, name)
	r := runDoc(t, e, smbiosJob, "s1")
	if r.State != result.StateDone {
		t.Fatalf("smbios job: %s %+v", r.State, r.Error)
	}
	x := inactive()
	for _, want := range []string{"<entry>myapp:role=web</entry>", "<entry name='manufacturer'>Example</entry>", "<smbios mode='sysinfo'/>",
		"<entry>io.systemd.credential:system.hostname=cint1</entry>", "<entry>io.systemd.credential:firstboot.timezone=Europe/Berlin</entry>",
		"<entry>io.systemd.credential.binary:login.motd=aGVsbG8K</entry>", recipe.Namespace} {
		if !strings.Contains(x, want) {
			t.Errorf("the definition lacks %s:\n%s", want, x)
		}
	}
	if !slices.Equal(r.Credentials, []string{"firstboot.hostname", "firstboot.timezone", "login.motd", "system.hostname"}) || r.Payload != nil || len(r.FwCfg) != 0 || r.DomainState != "shut off" {
		t.Errorf("result: credentials %v payload %+v fw_cfg %v state %q", r.Credentials, r.Payload, r.FwCfg, r.DomainState)
	}
	if f := files(); len(f) != 0 {
		t.Errorf("an SMBIOS job wrote files: %v", f)
	}
	check(r)

	// 2. fw_cfg supersedes it
	fwJob := fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","format":"credentials","credentials_delivery":"fwcfg","locale":"C.UTF-8","issue":"banner\n","credential_secrets":{"app.token":"app-token"}}`, name)
	r = runDoc(t, e, fwJob, "f1")
	if r.State != result.StateDone {
		t.Fatalf("fwcfg job: %s %+v", r.State, r.Error)
	}
	x = inactive()
	if got := oem.FindAllString(x, -1); len(got) != 0 {
		t.Errorf("the SMBIOS credentials stayed: %v", got)
	}
	if !strings.Contains(x, "<entry>myapp:role=web</entry>") {
		t.Errorf("the user's OEM string went:\n%s", x)
	}
	want := map[string]string{"app.token": secret, "firstboot.locale": "C.UTF-8", "login.issue": "banner\n"}
	ents, err := domxml.FwCfgEntries(x)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(want) || len(files()) != len(want) {
		t.Fatalf("fw_cfg entries %v, files %v", ents, files())
	}
	checkFiles := func(ents []domxml.FwCfgEntry) {
		t.Helper()
		for _, en := range ents {
			n := strings.TrimPrefix(en.Name, domxml.CredentialFwCfgPrefix)
			b, err := os.ReadFile(en.File)
			fi, serr := os.Stat(en.File)
			if err != nil || serr != nil || string(b) != want[n] || fi.Mode().Perm() != 0o600 || filepath.Dir(en.File) != dir || !strings.HasPrefix(filepath.Base(en.File), d.UUID+"-") {
				t.Errorf("entry %s → %s: %q (%v %v %v)", en.Name, en.File, b, err, serr, fi)
			}
		}
	}
	checkFiles(ents)
	if len(r.FwCfg) != 3 || !slices.Equal(r.Credentials, []string{"app.token", "firstboot.locale", "login.issue"}) {
		t.Errorf("result fw_cfg %v credentials %v", r.FwCfg, r.Credentials)
	}
	check(r)

	// 3. bad input: refused by field, nothing attached lost
	for _, c := range []struct{ members, field string }{
		{`"credentials":{"firstboot.timezon":"UTC"}`, "credentials.firstboot.timezon"},
		{`"credentials":{"a/b":"x"}`, "credentials.a/b"},
		{`"credentials":{"a=b":"x"}`, "credentials.a=b"},
		{`"credentials":{"my.cred":"a\u0000b"}`, "credentials.my.cred"},
		{`"credentials":{"my.cred":{"base64":"not base64!"}}`, "credentials.my.cred.base64"},
		{`"credentials_delivery":"smbios","credential_secrets":{"app.token":"app-token"}`, "credential_secrets.app.token"},
		{`"credentials_delivery":"fwcfg","credential_secrets":{"app.token":"missing"}`, "credential_secrets.app.token"},
	} {
		before := inactive()
		// the engine's own check (the API and the spool refuse it before)
		j, _ := job.ParseWith([]byte(fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","format":"credentials",%s}`, name, c.members)), job.Defaults{})
		if j == nil {
			t.Fatalf("%s: not a job object", c.members)
		}
		r, err := e.Run(ctx, j, result.Result{ID: "bad"})
		if err != nil {
			t.Fatal(err)
		}
		if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeInvalidJob || !slices.ContainsFunc(r.Errors, func(fe job.FieldError) bool { return fe.Field == c.field }) {
			t.Errorf("%s: %s %+v %+v (want field %s)", c.members, r.State, r.Error, r.Errors, c.field)
		}
		if after := inactive(); after != before {
			t.Errorf("%s: the refused job changed the definition", c.members)
		}
		checkFiles(ents)
		check(r)
	}
	// a user's own fw_cfg entry of a credential the job sets: refused
	{
		before := inactive()
		own := filepath.Join(t.TempDir(), "own")
		ed, _ := domxml.NewEdit(before)
		if _, err := ed.SetFwCfgFile(own, domxml.CredentialFwCfgName("system.hostname")); err != nil {
			t.Fatal(err)
		}
		withOwn, _ := ed.XML()
		if _, err := h.DefineXML(ctx, withOwn); err != nil {
			t.Fatal(err)
		}
		r := runDoc(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","format":"credentials","credentials_delivery":"fwcfg","hostname":"h"}`, name), "own")
		if r.State != result.StateFailed || r.Error == nil || r.Error.Field != "credentials_delivery" || !strings.Contains(r.Error.Message, `"system.hostname"`) {
			t.Errorf("the user's own credential entry: %s %+v", r.State, r.Error)
		}
		if _, err := h.DefineXML(ctx, before); err != nil {
			t.Fatal(err)
		}
		checkFiles(ents)
	}

	// 4. a host reboot: the payload directory emptied; start-up rebuilds
	// each file, orphan collection keeps them
	for _, f := range files() {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	// this test's domain only: the shared libvirtd holds other tests'
	// domains, whose recipes name other payload directories
	mine := func() Definitions {
		t.Helper()
		defs, err := e.ListDefined(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defs.Domains = slices.DeleteFunc(defs.Domains, func(dd Defined) bool { return dd.UUID != d.UUID })
		if len(defs.Domains) != 1 {
			t.Fatalf("%d definitions of the test's domain", len(defs.Domains))
		}
		return defs
	}
	defs := mine()
	st, err := e.RebuildImages(ctx, defs)
	if err != nil || st.Failed != 0 || st.Rebuilt != 1 {
		t.Fatalf("RebuildImages: %+v %v\n%s", st, err, logs.String())
	}
	checkFiles(ents)
	if _, err := e.CollectOrphans(ctx, mine()); err != nil {
		t.Fatal(err)
	}
	checkFiles(ents)
	noSecret("the log", logs.String())

	// 5. SMBIOS again: the fw_cfg entries and files go
	r = runDoc(t, e, smbiosJob, "s2")
	if r.State != result.StateDone {
		t.Fatalf("smbios job again: %s %+v", r.State, r.Error)
	}
	x = inactive()
	if ents, _ := domxml.FwCfgEntries(x); len(ents) != 0 || len(files()) != 0 {
		t.Errorf("fw_cfg entries %v and files %v stayed", ents, files())
	}
	if len(oem.FindAllString(x, -1)) != 4 {
		t.Errorf("OEM strings: %v", oem.FindAllString(x, -1))
	}

	// 6. fw_cfg, then detach: entries, OEM strings, recipe and files go
	if r = runDoc(t, e, fwJob, "f2"); r.State != result.StateDone {
		t.Fatalf("fwcfg job again: %s %+v", r.State, r.Error)
	}
	if r = runDoc(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"action":"detach"}`, name), "d"); r.State != result.StateDone {
		t.Fatalf("detach: %s %+v", r.State, r.Error)
	}
	x = inactive()
	if ents, _ := domxml.FwCfgEntries(x); len(ents) != 0 || len(files()) != 0 || strings.Contains(x, recipe.Namespace) || len(oem.FindAllString(x, -1)) != 0 {
		t.Errorf("after detach: entries %v files %v\n%s", ents, files(), x)
	}
	if !strings.Contains(x, "<entry>myapp:role=web</entry>") {
		t.Errorf("the user's OEM string went")
	}
	// an SMBIOS payload detaches too
	runDoc(t, e, smbiosJob, "s3")
	if r = runDoc(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"action":"detach"}`, name), "d2"); r.State != result.StateDone {
		t.Fatalf("detach: %s %+v", r.State, r.Error)
	}
	if x = inactive(); len(oem.FindAllString(x, -1)) != 0 || !strings.Contains(x, "<entry>myapp:role=web</entry>") {
		t.Errorf("after detaching SMBIOS:\n%s", x)
	}
	noSecret("the log", logs.String())
}
