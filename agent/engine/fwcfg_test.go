package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/libvirtx/libvirtxtest"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/recipe"

	ignconfig "github.com/coreos/ignition/v2/config"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// fwEnv is one TestFwCfgOnFakeHost case: the host, the engine and the
// domain.
type fwEnv struct {
	f    *libvirtxtest.Fake
	e    *Engine
	uuid string
	// run runs a job document (members after version and domain)
	run func(members string) result.Result
}

// TestFwCfgOnFakeHost runs Ignition jobs delivered by fw_cfg (issue 34)
// on the scripted host: attach to a stopped and a running domain, an image
// giving way to the config and back, detach, and refusals that change
// nothing. Each case checks the libvirt changes made, the persistent
// definition (entries, recipe, drive), the payload directory and the
// result's wording for a running domain.
func TestFwCfgOnFakeHost(t *testing.T) {
	const (
		define = "DefineXML"
		start  = "Start"
	)
	const ign = `"format":"ignition","hostname":"fc1.example.com","users":[{"name":"core","password_hash":"$6$salt$hash","ssh_authorized_keys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ9UCj6yFbzrJRqgbKp1+pjOWpNQWIeq40ujmhEHvz3p core@x"]}]`
	const ign2 = `"format":"ignition","hostname":"fc2.example.com"`
	const cloud = `"hostname":"ci1"`
	cases := []struct {
		name   string
		active bool
		// before: jobs run before the case's job (members), in order, on
		// the stopped domain; an active domain is started after them (its
		// QEMU reads the definition as they left it)
		before []string
		setup  func(t *testing.T, v fwEnv)
		job    string
		// want
		code        string // "" done
		methods     []string
		takesEffect string
		msg         string // in the notice (done) or the error (failed)
		check       func(t *testing.T, v fwEnv, r result.Result)
	}{
		{name: "stopped: entries, recipe, file", job: ign, methods: []string{define},
			check: func(t *testing.T, v fwEnv, r result.Result) { wantFwCfg(t, v.f.XML(v.uuid), r) }},
		{name: "stopped: start", job: ign + `,"action":"start"`, methods: []string{define, start},
			check: func(t *testing.T, v fwEnv, r result.Result) {
				if r.DomainState != "running" {
					t.Errorf("domain state %q", r.DomainState)
				}
			}},
		{name: "stopped: same job again changes nothing", before: []string{ign}, job: ign, methods: nil,
			check: func(t *testing.T, v fwEnv, r result.Result) {
				if r.Payload == nil || !r.Payload.Reused {
					t.Errorf("payload %+v, want the file reused", r.Payload)
				}
				wantFwCfg(t, v.f.XML(v.uuid), r)
			}},
		{name: "stopped: new config replaces the old file", before: []string{ign2}, job: ign, methods: []string{define},
			check: func(t *testing.T, v fwEnv, r result.Result) { wantFwCfg(t, v.f.XML(v.uuid), r) }},
		{name: "stopped: config replaces an image drive", before: []string{cloud}, job: ign, methods: []string{define},
			check: func(t *testing.T, v fwEnv, r result.Result) {
				if _, found, _ := domxml.FindPayload(v.f.XML(v.uuid)); found {
					t.Error("the payload drive is still defined")
				}
				wantFwCfg(t, v.f.XML(v.uuid), r)
			}},
		{name: "stopped: image replaces the config", before: []string{ign}, job: cloud, methods: []string{define},
			check: func(t *testing.T, v fwEnv, r result.Result) {
				x := v.f.XML(v.uuid)
				if ents, _ := domxml.FwCfgEntries(x); len(ents) != 0 {
					t.Errorf("fw_cfg entries left: %v", ents)
				}
				if p, found, _ := domxml.FindPayload(x); !found || p.Path != r.Payload.Path {
					t.Errorf("drive %+v (found %v)", p, found)
				}
				wantFiles(t, v.e.PayloadDir, r.Payload.Path)
			}},
		{name: "stopped: a user's own fw_cfg entries stay", job: ign, methods: []string{define},
			setup: func(t *testing.T, v fwEnv) {
				x := strings.Replace(v.f.XML(v.uuid), "<os>", `<sysinfo type='fwcfg'><entry name='opt/com.example/token'>t</entry><entry name='opt/com.coreos/config' file='/srv/own.ign'/></sysinfo><os>`, 1)
				if _, err := v.f.DefineXML(context.Background(), x); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, v fwEnv, r result.Result) {
				ents, _ := domxml.FwCfgEntries(v.f.XML(v.uuid))
				if len(ents) != 3 || ents[0].Name != "opt/com.example/token" {
					t.Errorf("entries %+v, want the user's token and the two Ignition entries", ents)
				}
				wantFwCfg(t, v.f.XML(v.uuid), r)
			}},
		// running: the definition changes, the guest sees it at its next
		// cold start; the live definition is never touched
		{name: "running: next cold start", active: true, job: ign, methods: []string{define},
			takesEffect: result.TakesEffectNextColdStart, msg: "next cold start",
			check: func(t *testing.T, v fwEnv, r result.Result) {
				wantFwCfg(t, v.f.XML(v.uuid), r)
				if r.DomainState != "running" {
					t.Errorf("domain state %q", r.DomainState)
				}
				live, _ := v.f.LiveXML(context.Background(), v.uuid)
				if ents, _ := domxml.FwCfgEntries(live); len(ents) != 0 {
					t.Errorf("live entries %v", ents)
				}
			}},
		{name: "running: started with an older config, next cold start", active: true, before: []string{ign2}, job: ign, methods: []string{define},
			takesEffect: result.TakesEffectNextColdStart, msg: "next cold start",
			check: func(t *testing.T, v fwEnv, r result.Result) {
				// the file QEMU was started with goes when the domain stops
				live, _ := v.f.LiveXML(context.Background(), v.uuid)
				old, _ := domxml.FwCfgEntries(live)
				if len(old) != 2 || old[0].File == r.Payload.Path {
					t.Fatalf("live entries %v", old)
				}
				wantStopRemoves(t, v, old[0].File)
				wantFwCfg(t, v.f.XML(v.uuid), r)
			}},
		{name: "running: started with this config, nothing to wait for", active: true, before: []string{ign}, job: ign, methods: nil},
		{name: "running: action start on a running domain", active: true, job: ign + `,"action":"start"`, methods: []string{define},
			takesEffect: result.TakesEffectNextColdStart},
		{name: "running: config replaces a live image drive in the definition only", active: true, before: []string{cloud}, job: ign, methods: []string{define},
			takesEffect: result.TakesEffectNextColdStart,
			check: func(t *testing.T, v fwEnv, r result.Result) {
				if _, found, _ := domxml.FindPayload(v.f.XML(v.uuid)); found {
					t.Error("the payload drive is still defined")
				}
				live, _ := v.f.LiveXML(context.Background(), v.uuid)
				p, found, _ := domxml.FindPayload(live)
				if !found {
					t.Fatal("the live drive was touched")
				}
				wantStopRemoves(t, v, p.Path)
			}},
		// refusals change nothing
		{name: "refused: define fails, no file left", job: ign, code: result.CodeLibvirt, methods: []string{define}, msg: "fw_cfg entries",
			setup: func(t *testing.T, v fwEnv) { v.f.FailNext(define, libvirtxtest.Failed("XML error: bad")) },
			check: func(t *testing.T, v fwEnv, r result.Result) {
				if ents, _ := domxml.FwCfgEntries(v.f.XML(v.uuid)); len(ents) != 0 {
					t.Errorf("entries %v", ents)
				}
				wantFiles(t, v.e.PayloadDir)
			}},
		{name: "refused: define fails, the earlier config stays", before: []string{ign2}, job: ign, code: result.CodeLibvirt, methods: []string{define},
			setup: func(t *testing.T, v fwEnv) { v.f.FailNext(define, libvirtxtest.Failed("XML error: bad")) },
			check: func(t *testing.T, v fwEnv, r result.Result) {
				rc, ok, err := recipe.FromDomainXML(v.f.XML(v.uuid))
				if err != nil || !ok {
					t.Fatalf("recipe %v %v", ok, err)
				}
				wantFiles(t, v.e.PayloadDir, rc.Path)
			}},
		{name: "refused: a field Ignition has no meaning for", job: ign + `,"runcmd":["true"]`, code: result.CodeInvalidJob, methods: nil,
			check: func(t *testing.T, v fwEnv, r result.Result) {
				if r.Error.Field != "runcmd" {
					t.Errorf("field %q", r.Error.Field)
				}
				wantFiles(t, v.e.PayloadDir)
			}},
		{name: "refused: media vfat", job: ign + `,"media":"vfat"`, code: result.CodeInvalidJob, methods: nil,
			check: func(t *testing.T, v fwEnv, r result.Result) { wantFiles(t, v.e.PayloadDir) }},
		// detach
		{name: "detach: stopped", before: []string{ign}, job: `"action":"detach"`, methods: []string{define},
			check: func(t *testing.T, v fwEnv, r result.Result) {
				x := v.f.XML(v.uuid)
				if ents, _ := domxml.FwCfgEntries(x); len(ents) != 0 || strings.Contains(x, "sysinfo") {
					t.Errorf("entries left: %v\n%s", ents, x)
				}
				if _, ok, _ := recipe.FromDomainXML(x); ok {
					t.Error("recipe left")
				}
				wantFiles(t, v.e.PayloadDir)
			}},
		{name: "detach: running, started with the config", active: true, before: []string{ign}, job: `"action":"detach"`, methods: []string{define},
			takesEffect: result.TakesEffectNextColdStart, msg: "until its next cold start",
			check: func(t *testing.T, v fwEnv, r result.Result) {
				live, _ := v.f.LiveXML(context.Background(), v.uuid)
				old, _ := domxml.FwCfgEntries(live)
				if len(old) != 2 {
					t.Fatalf("live entries %v", old)
				}
				wantStopRemoves(t, v, old[0].File)
			}},
		{name: "detach: running, config defined after it started", active: true, before: []string{ign}, job: `"action":"detach"`, methods: []string{define},
			setup: func(t *testing.T, v fwEnv) { v.f.SetLiveXML(v.uuid, fakeDomainXML("fwcfg-live", false)) },
			check: func(t *testing.T, v fwEnv, r result.Result) { wantFiles(t, v.e.PayloadDir) }},
		{name: "detach: a user's own Ignition entry elsewhere stays", job: `"action":"detach"`, methods: nil,
			setup: func(t *testing.T, v fwEnv) {
				x := strings.Replace(v.f.XML(v.uuid), "<os>", `<sysinfo type='fwcfg'><entry name='opt/com.coreos/config' file='/srv/own.ign'/></sysinfo><os>`, 1)
				if _, err := v.f.DefineXML(context.Background(), x); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, v fwEnv, r result.Result) {
				if ents, _ := domxml.FwCfgEntries(v.f.XML(v.uuid)); len(ents) != 1 {
					t.Errorf("entries %v", ents)
				}
			}},
		{name: "detach: redefine refused, file kept", before: []string{ign}, job: `"action":"detach"`, code: result.CodeLibvirt, methods: []string{define},
			setup: func(t *testing.T, v fwEnv) { v.f.FailNext(define, libvirtxtest.Failed("XML error")) },
			check: func(t *testing.T, v fwEnv, r result.Result) {
				rc, ok, _ := recipe.FromDomainXML(v.f.XML(v.uuid))
				if !ok {
					t.Fatal("recipe gone")
				}
				wantFiles(t, v.e.PayloadDir, rc.Path)
			}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("fwcfg-%d", i)
			f, d, e := fakeJobEngine(t, fakeDomainXML(name, false))
			n := 0
			v := fwEnv{f: f, e: e, uuid: d.UUID, run: func(members string) result.Result {
				n++
				if !strings.Contains(members, `"action"`) {
					members += `,"action":"attach"`
				}
				// parsed, not validated: the engine's own check must refuse
				// what the API and the spool would
				j, _ := job.Parse([]byte(fmt.Sprintf(`{"version":1,"domain":%q,%s}`, name, members)))
				if j == nil {
					t.Fatalf("job %s does not parse", members)
				}
				r, err := e.Run(context.Background(), j, result.Result{ID: fmt.Sprintf("j%d", n)})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}}
			for _, b := range c.before {
				if r := v.run(b); r.State != result.StateDone {
					t.Fatalf("earlier job %s: %s %+v", b, r.State, r.Error)
				}
			}
			if c.active {
				f.SetActive(d.UUID, true)
			}
			if c.setup != nil {
				c.setup(t, v)
			}
			f.ResetCalls()
			r := v.run(c.job)
			code := ""
			if r.Error != nil {
				code = r.Error.Code
			}
			if code != c.code {
				t.Fatalf("result %s %+v, want code %q", r.State, r.Error, c.code)
			}
			if got := f.Methods(); !reflect.DeepEqual(got, c.methods) && !(len(got) == 0 && len(c.methods) == 0) {
				t.Errorf("libvirt changes %q, want %q", got, c.methods)
			}
			if r.TakesEffect != c.takesEffect || (r.TakesEffect == "") != (r.Notice == "") {
				t.Errorf("takes_effect %q (notice %q), want %q", r.TakesEffect, r.Notice, c.takesEffect)
			}
			if c.msg != "" {
				got := r.Notice
				if r.Error != nil {
					got = r.Error.Message
				}
				if !strings.Contains(got, c.msg) {
					t.Errorf("%q does not say %q", got, c.msg)
				}
			}
			if c.check != nil {
				c.check(t, v, r)
			}
		})
	}
}

// wantFwCfg fails unless domainXML names r's config file in both Ignition
// fw_cfg entries, has its recipe and no payload drive, the file holds the
// recorded bytes, Ignition parses it cleanly, and the payload directory
// holds nothing else.
func wantFwCfg(t *testing.T, domainXML string, r result.Result) {
	t.Helper()
	if r.Payload == nil || r.Payload.Format != "ignition" || r.Payload.Label != "" || r.Device != nil {
		t.Fatalf("payload %+v, device %+v", r.Payload, r.Device)
	}
	if !slices.Equal(r.FwCfg, domxml.IgnitionFwCfgNames) {
		t.Errorf("result fw_cfg %v", r.FwCfg)
	}
	ents, err := domxml.FwCfgEntries(domainXML)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range ents {
		if domxml.IsIgnitionFwCfg(en.Name) {
			names = append(names, en.Name)
			if en.File != r.Payload.Path {
				t.Errorf("entry %+v, want file %s", en, r.Payload.Path)
			}
		}
	}
	if !slices.Equal(names, domxml.IgnitionFwCfgNames) {
		t.Errorf("Ignition entries %v in\n%s", names, domainXML)
	}
	rc, ok, err := recipe.FromDomainXML(domainXML)
	if err != nil || !ok || rc.Path != r.Payload.Path || rc.SHA256 != r.Payload.SHA256 {
		t.Errorf("recipe %+v (%v %v)", rc, ok, err)
	}
	if _, found, _ := domxml.FindPayload(domainXML); found {
		t.Error("a payload drive is defined")
	}
	b, err := os.ReadFile(r.Payload.Path)
	if err != nil {
		t.Fatal(err)
	}
	if testenv.SHA256(b) != r.Payload.SHA256 {
		t.Errorf("file sha256 differs from the result's")
	}
	if _, rpt, err := ignconfig.Parse(b); err != nil || len(rpt.Entries) != 0 {
		t.Errorf("config.Parse: %v %s", err, rpt.String())
	}
	wantFiles(t, filepath.Dir(r.Payload.Path), r.Payload.Path)
}

// wantFiles fails unless dir holds exactly the files paths.
func wantFiles(t *testing.T, dir string, paths ...string) {
	t.Helper()
	var got []string
	for _, n := range testenv.DirNames(t, dir) {
		got = append(got, filepath.Join(dir, n))
	}
	slices.Sort(paths)
	if !slices.Equal(got, paths) {
		t.Errorf("payload directory holds %v, want %v", got, paths)
	}
}

// TestFwCfgRebuildAndOrphans: on libvirt's test driver (libvirt's own
// domain XML parser reads the fw_cfg entries and writes them back), the
// start-up rebuild makes a missing Ignition config file again from the
// recipe, byte-identical, with the image mode, and orphan collection keeps
// it (named by the entries and the recipe) while a stray file goes.
func TestFwCfgRebuildAndOrphans(t *testing.T) {
	h := emptyNodeHost(t)
	ctx := context.Background()
	e := newEngine(t, h)
	defineTestDomain(t, h, "vmpx-fwcfg-rebuild")
	r := runDone(t, e, `{"version":1,"domain":"vmpx-fwcfg-rebuild","action":"attach","format":"ignition","hostname":"fc","users":[{"name":"core","password":"plain-core"}]}`)
	d, err := h.Domain(ctx, "vmpx-fwcfg-rebuild")
	if err != nil {
		t.Fatal(err)
	}
	wantFwCfg(t, d.InactiveXML, r)
	if !strings.Contains(d.InactiveXML, "<sysinfo type='fwcfg'>") || strings.Contains(d.InactiveXML, "plain-core") {
		t.Errorf("libvirt's definition:\n%s", d.InactiveXML)
	}
	rebuildAndCollect(t, e, r)
	wantFiles(t, e.PayloadDir, r.Payload.Path)
}

// wantStopRemoves fails unless the payload directory holds path, a file
// the running domain's QEMU was started with, until the domain stops, and
// not after (DomainStopped).
func wantStopRemoves(t *testing.T, v fwEnv, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s removed while the domain runs: %v", path, err)
	}
	if got := v.e.Cleanups.DeferredUntilStop(v.uuid); !slices.Equal(got, []string{path}) {
		t.Errorf("deferred until stop %v, want %s", got, path)
	}
	v.f.SetActive(v.uuid, false)
	v.e.DomainStopped(v.uuid)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s still there after the domain stopped (%v)", path, err)
	}
}

// TestOrphansOfRunningDomain: after an agent restart, orphan collection
// keeps a file a running domain's QEMU was started with although no
// definition names it any more (a fw_cfg config replaced while the domain
// ran), and removes it when the domain stops.
func TestOrphansOfRunningDomain(t *testing.T) {
	f := libvirtxtest.New()
	defer f.Close()
	ctx := context.Background()
	d, err := f.DefineXML(ctx, fakeDomainXML("fwcfg-orphan", false))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	newEngine := func() *Engine {
		return &Engine{Host: f, PayloadDir: dir, ImageMode: 0o640, ImageGID: -1, Cleanups: &Cleanups{}, Starts: &Starts{},
			Log: quietLog()}
	}
	e := newEngine()
	r1 := runDone(t, e, `{"version":1,"domain":"fwcfg-orphan","action":"attach","format":"ignition","hostname":"one"}`)
	f.SetActive(d.UUID, true)
	r2 := runDone(t, e, `{"version":1,"domain":"fwcfg-orphan","action":"attach","format":"ignition","hostname":"two"}`)
	if r2.TakesEffect != result.TakesEffectNextColdStart {
		t.Fatalf("second job takes_effect %q", r2.TakesEffect)
	}
	// the agent restarts: a new engine, nothing remembered
	e = newEngine()
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{r1.Payload.Path, r2.Payload.Path} {
		must(t, os.Chtimes(p, old, old))
	}
	defs, err := e.ListDefined(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.CollectOrphans(ctx, defs); err != nil || n != 0 {
		t.Fatalf("orphan collection removed %d (%v)", n, err)
	}
	wantFiles(t, dir, r1.Payload.Path, r2.Payload.Path)
	f.SetActive(d.UUID, false)
	e.DomainStopped(d.UUID)
	wantFiles(t, dir, r2.Payload.Path)
}
