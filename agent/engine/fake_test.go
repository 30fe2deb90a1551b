package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/libvirtx/libvirtxtest"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/testenv"

	ignconfig "github.com/coreos/ignition/v2/config"
)

// sample returns the value of one series (name{labels}) in m's exposition;
// a missing series fails the test.
func sample(t *testing.T, m *metrics.Agent, series string) string {
	t.Helper()
	var b strings.Builder
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	t.Fatalf("no series %s in\n%s", series, b.String())
	return ""
}

// quietLog is a logger that discards: for engines whose log the test does
// not read.
func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEngine is an Engine on h writing images to a fresh directory with mode
// 0640 and the process's group, logging nowhere; the caller sets the rest.
func newEngine(t *testing.T, h libvirtx.Host) *Engine {
	return &Engine{Host: h, PayloadDir: t.TempDir(), ImageMode: 0o640, ImageGID: -1, Log: quietLog()}
}

// fakeJobEngine is the set-up of the fake-host job tables: a fake host
// (closed when t ends) with one domain defined from domainXML, and an
// engine on it that picks the bus itself, tracks starts and cleanups,
// counts metrics and bounds a live media change at 2 s.
func fakeJobEngine(t *testing.T, domainXML string) (*libvirtxtest.Fake, libvirtx.DomainInfo, *Engine) {
	t.Helper()
	f := libvirtxtest.New()
	t.Cleanup(func() { f.Close() })
	d, err := f.DefineXML(context.Background(), domainXML)
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, f)
	e.Bus, e.Starts, e.Cleanups, e.Metrics, e.TrayWait = domxml.BusAuto, &Starts{}, &Cleanups{}, metrics.New(), 2*time.Second
	return f, d, e
}

// rebuildAndCollect loses r's payload file and leaves an hour-old stray
// file in e's payload directory, then runs start-up's rebuild and orphan
// collection over the defined domains: the rebuild must make the one
// payload again byte-identical and with the image mode, and collection
// must remove the stray file only. It returns the stray file's path.
func rebuildAndCollect(t *testing.T, e *Engine, r result.Result) string {
	t.Helper()
	ctx := context.Background()
	must(t, os.Remove(r.Payload.Path))
	stray := filepath.Join(e.PayloadDir, "0000-stray.ign")
	must(t, os.WriteFile(stray, []byte("{}"), 0o640))
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(stray, old, old))
	defs, err := e.ListDefined(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.RebuildImages(ctx, defs)
	if err != nil || st != (RebuildStats{Rebuilt: 1}) {
		t.Fatalf("rebuild %+v %v", st, err)
	}
	if sum := testenv.FileSHA256(t, r.Payload.Path); sum != r.Payload.SHA256 {
		t.Errorf("rebuilt config sha256 %s, want %s", sum, r.Payload.SHA256)
	}
	if fi, err := os.Stat(r.Payload.Path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("rebuilt config mode %v (%v)", fi.Mode(), err)
	}
	// the rebuilt file is older than the listing: collection judges it
	must(t, os.Chtimes(r.Payload.Path, old, old))
	if n, err := e.CollectOrphans(ctx, defs); err != nil || n != 1 {
		t.Errorf("orphan collection removed %d (%v), want the stray file", n, err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("stray file kept: %v", err)
	}
	return stray
}

// fakeDomainXML is a shut-off domain on machine pc; scsi adds a virtio-scsi
// controller.
func fakeDomainXML(name string, scsi bool) string {
	ctl := ""
	if scsi {
		ctl = `<controller type='scsi' index='0' model='virtio-scsi'/>`
	}
	return fmt.Sprintf(`<domain type='kvm'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os><features><acpi/></features><devices>%s</devices></domain>`, name, ctl)
}

// withTrayOpen marks the payload drive's tray open in a live XML (libvirt's
// stale record after a guest reset raced a media change).
func withTrayOpen(t *testing.T, x string) string {
	t.Helper()
	p, found, err := domxml.FindPayload(x)
	if err != nil || !found {
		t.Fatalf("no payload drive to open: %v", err)
	}
	old := fmt.Sprintf("<target dev='%s' bus='%s'/>", p.Target, p.Bus)
	if !strings.Contains(x, old) {
		t.Fatalf("live XML lacks %s:\n%s", old, x)
	}
	return strings.Replace(x, old, fmt.Sprintf("<target dev='%s' bus='%s' tray='open'/>", p.Target, p.Bus), 1)
}

// leftLive makes the running domain's state what a detach leaves: the
// payload drive out of the persistent definition and, live, still there
// with its medium ejected (an IDE/SATA CD-ROM cannot be unplugged).
func leftLive(t *testing.T, f *libvirtxtest.Fake, uuid string) {
	t.Helper()
	x := f.XML(uuid)
	p, found, err := domxml.FindPayload(x)
	if err != nil || !found {
		t.Fatalf("no payload drive to leave live: %v", err)
	}
	src := fmt.Sprintf("<source file='%s' startupPolicy='optional'/>", p.Path)
	if !strings.Contains(x, src) {
		t.Fatalf("definition lacks %s:\n%s", src, x)
	}
	f.SetLiveXML(uuid, strings.Replace(x, src, "", 1))
	saved, err := withoutPayload(x)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.DefineXML(context.Background(), saved); err != nil {
		t.Fatal(err)
	}
}

// TestEngineBranchesOnFakeHost runs jobs through every branch of attach,
// changeMedia, replaceDrive and detach on a scripted in-memory host and
// checks the outcome and the libvirt changes made, in order. The same paths
// run against a real libvirtd in libvirtd_test.go and the agent's
// integration tests; the fake reaches the failures a daemon rarely gives.
func TestEngineBranchesOnFakeHost(t *testing.T) {
	const (
		define = "DefineXML"
		start  = "Start"
		update = "UpdateDevice"
		attach = "AttachDevice"
		detach = "DetachDevice"
		reset  = "Reset"
	)
	type env struct {
		f    *libvirtxtest.Fake
		e    *Engine
		uuid string
	}
	cases := []struct {
		name string
		scsi bool
		bus  domxml.Bus
		// drive: the domain already has a payload drive (an earlier job)
		drive  bool
		media  string // of the job ("" iso; the earlier job is always iso unless driveMedia)
		driveM string // media of the earlier job
		active bool
		action string // of the job ("" attach)
		same   bool   // the job has the earlier job's content
		extra  string // more members of the job (",\"format\":...")
		setup  func(t *testing.T, v env)
		// want
		code    string // "" done
		methods []string
		msg     string // in the error message
		// recovery: the media recovery the job counts (metrics.Recovery*)
		recovery string
		check    func(t *testing.T, v env, r result.Result)
	}{
		// attach to a shut-off domain
		{name: "stopped: add drive", methods: []string{define}},
		{name: "stopped: start", action: "start", methods: []string{define, start},
			check: func(t *testing.T, v env, r result.Result) {
				if r.DomainState != "running" {
					t.Errorf("domain state %q", r.DomainState)
				}
			}},
		{name: "stopped: define refused", setup: func(t *testing.T, v env) { v.f.FailNext(define, libvirtxtest.Failed("XML error: bad")) },
			code: result.CodeLibvirt, methods: []string{define}, msg: "redefining"},
		{name: "stopped: start refused", action: "start", setup: func(t *testing.T, v env) { v.f.FailNext(start, libvirtxtest.Failed("no memory")) },
			// issue 41: the definition goes back as it was before the job
			code: result.CodeLibvirt, methods: []string{define, start, define}, msg: "the definition is back as it was before the job",
			check: func(t *testing.T, v env, r result.Result) {
				if x := v.f.XML(v.uuid); strings.Contains(x, "ua-vmpayload") || strings.Contains(x, "recipe") {
					t.Errorf("definition after the failed start:\n%s", x)
				}
			}},
		{name: "stopped: same content again", drive: true, same: true, methods: nil},
		{name: "stopped: vfat disk replaces CD-ROM", drive: true, media: "vfat", methods: []string{define}},
		// Ignition (issue 34): the image deliveries go the image path; fw_cfg
		// has its own table (TestFwCfgOnFakeHost)
		{name: "stopped: ignition by fw_cfg, started", action: "start", extra: `,"format":"ignition"`, methods: []string{define, start},
			check: func(t *testing.T, v env, r result.Result) {
				if r.Device != nil || len(r.FwCfg) != 2 || r.TakesEffect != "" {
					t.Errorf("device %+v, fw_cfg %v, takes_effect %q", r.Device, r.FwCfg, r.TakesEffect)
				}
			}},
		{name: "stopped: ignition config-2 image attached", action: "start", extra: `,"format":"ignition","ignition_delivery":"configdrive"`, methods: []string{define, start},
			check: func(t *testing.T, v env, r result.Result) {
				checkIgnitionImage(t, r, "config-2", "openstack/latest/user_data")
			}},
		{name: "running: ignition cidata medium change", drive: true, active: true, extra: `,"format":"ignition","ignition_delivery":"nocloud"`, methods: []string{update, define},
			check: func(t *testing.T, v env, r result.Result) { checkIgnitionImage(t, r, "cidata", "user-data") }},
		// attach to a running domain
		{name: "running: same content records nothing new", drive: true, same: true, active: true, methods: nil},
		{name: "running: change medium, then record the recipe", drive: true, active: true, methods: []string{update, define}},
		{name: "running: CD-ROM drive, vfat job", drive: true, active: true, media: "vfat", code: result.CodeDomainRunning, methods: nil, msg: "only a CD-ROM's medium can change"},
		{name: "running: vfat disk drive, iso job", drive: true, driveM: "vfat", active: true, code: result.CodeDomainRunning, methods: nil},
		{name: "running: no drive, no SCSI", active: true, code: result.CodeDomainRunning, methods: nil, msg: "SCSI controller"},
		{name: "running: no drive, IDE bus configured", scsi: true, bus: domxml.BusIDE, active: true, code: result.CodeDomainRunning, methods: nil},
		{name: "running: no drive, hot-plug CD-ROM on SCSI", scsi: true, active: true, methods: []string{attach, define},
			check: func(t *testing.T, v env, r result.Result) {
				if r.Device == nil || r.Device.Bus != "scsi" || r.Device.Kind != "cdrom" {
					t.Errorf("device %+v", r.Device)
				}
			}},
		{name: "running: no drive, hot-plug vfat disk", active: true, media: "vfat", methods: []string{attach, define},
			check: func(t *testing.T, v env, r result.Result) {
				if r.Device == nil || r.Device.Kind != "disk" {
					t.Errorf("device %+v", r.Device)
				}
			}},
		{name: "running: hot-plug refused", scsi: true, active: true, setup: func(t *testing.T, v env) { v.f.FailNext(attach, libvirtxtest.Failed("no free unit")) },
			code: result.CodeLibvirt, methods: []string{attach}, msg: "hot-plugging"},
		// attach to a running domain that has its payload drive live only
		// (ejected by a detach): the drive is reused and put back into the
		// definition, never hot-plugged again under the same alias
		{name: "running: drive left live by detach, reused", drive: true, active: true,
			setup: func(t *testing.T, v env) { leftLive(t, v.f, v.uuid) }, methods: []string{update, define},
			check: func(t *testing.T, v env, r result.Result) {
				for _, c := range v.f.Calls() {
					if c.Method == update && c.Flags != libvirtx.DOMAIN_DEVICE_MODIFY_LIVE|libvirtx.DOMAIN_DEVICE_MODIFY_FORCE {
						t.Errorf("media change flags %v, want live and force (the definition has no drive to change)", c.Flags)
					}
				}
				p, found, err := domxml.FindPayload(v.f.XML(v.uuid))
				if err != nil || !found || r.Payload == nil || p.Path != r.Payload.Path || r.Device == nil || p.Target != r.Device.Target || p.Target != "hda" {
					t.Errorf("persistent drive %+v (found %v, %v), result device %+v", p, found, err, r.Device)
				}
				if rc, ok, err := recipe.FromDomainXML(v.f.XML(v.uuid)); err != nil || !ok || rc.Path != r.Payload.Path {
					t.Errorf("recipe %+v (found %v, %v), want one for %s", rc, ok, err, r.Payload.Path)
				}
			}},
		{name: "running: drive left live on SCSI, stale tray, replaced live only", recovery: metrics.RecoveryReplace, scsi: true, bus: domxml.BusSCSI, drive: true, active: true,
			setup: func(t *testing.T, v env) {
				leftLive(t, v.f, v.uuid)
				live, _ := v.f.LiveXML(context.Background(), v.uuid)
				v.f.SetLiveXML(v.uuid, withTrayOpen(t, live))
				v.f.FailNext(update, libvirtxtest.TrayBusy())
			}, methods: []string{update, detach, attach, define},
			check: func(t *testing.T, v env, r result.Result) {
				for _, c := range v.f.Calls() {
					if (c.Method == detach || c.Method == attach) && c.Flags != libvirtx.DOMAIN_DEVICE_MODIFY_LIVE {
						t.Errorf("%s flags %v, want live only", c.Method, c.Flags)
					}
				}
				if _, found, _ := domxml.FindPayload(v.f.XML(v.uuid)); !found {
					t.Error("drive not put back into the definition")
				}
			}},
		{name: "running: drive left live, vfat job", drive: true, active: true, media: "vfat",
			setup: func(t *testing.T, v env) { leftLive(t, v.f, v.uuid) }, code: result.CodeDomainRunning, methods: nil, msg: "still has its payload drive hda"},
		{name: "running: drive left live, media change refused", drive: true, active: true,
			setup: func(t *testing.T, v env) {
				leftLive(t, v.f, v.uuid)
				v.f.FailNext(update, libvirtxtest.Failed("disk busy"))
			}, code: result.CodeLibvirt, methods: []string{update}, msg: "left live by a detach",
			check: func(t *testing.T, v env, r result.Result) {
				if _, found, _ := domxml.FindPayload(v.f.XML(v.uuid)); found {
					t.Error("failed job put the drive into the definition")
				}
				if r.Payload == nil {
					t.Fatal("no payload in the result")
				}
				if _, err := os.Stat(r.Payload.Path); !os.IsNotExist(err) {
					t.Errorf("the failed job's image %s was kept (%v)", r.Payload.Path, err)
				}
			}},
		{name: "running: drive left live, redefine refused", drive: true, active: true,
			setup: func(t *testing.T, v env) {
				leftLive(t, v.f, v.uuid)
				v.f.FailNext(define, libvirtxtest.Failed("XML error"))
			}, code: result.CodeLibvirt, methods: []string{update, define}, msg: "redefining"},
		{name: "running: live XML unreadable", scsi: true, active: true,
			setup: func(t *testing.T, v env) { v.f.FailNext("LiveXML", libvirtxtest.Failed("monitor gone")) },
			code:  result.CodeLibvirt, methods: nil, msg: "reading the live definition"},
		// changeMedia
		{name: "change: refused for another reason", drive: true, active: true, setup: func(t *testing.T, v env) { v.f.FailNext(update, libvirtxtest.Failed("disk busy")) },
			code: result.CodeLibvirt, methods: []string{update}, msg: "disk busy"},
		{name: "change: tray busy, then opens", drive: true, active: true, setup: func(t *testing.T, v env) { v.f.FailNext(update, libvirtxtest.TrayBusy()) },
			methods: []string{update, update, define}},
		{name: "change: tray busy, live XML unreadable", drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.FailNext(update, libvirtxtest.TrayBusy())
			v.f.FailNext("LiveXML", libvirtxtest.Failed("monitor gone"))
		}, code: result.CodeLibvirt, methods: []string{update}, msg: "reading the live definition"},
		{name: "change: tray stays locked on IDE", drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.FailNext(update, libvirtxtest.TrayBusy(), libvirtxtest.TrayBusy(), libvirtxtest.TrayBusy(), libvirtxtest.TrayBusy(), libvirtxtest.TrayBusy(), libvirtxtest.TrayBusy(), libvirtxtest.TrayBusy(), libvirtxtest.TrayBusy())
			v.e.TrayWait = 10 * time.Millisecond
		}, code: result.CodeMediaLocked, methods: []string{update}, msg: "locked shut"},
		{name: "change: tray stays locked on SCSI, drive replaced", recovery: metrics.RecoveryReplace, scsi: true, bus: domxml.BusSCSI, drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.FailNext(update, libvirtxtest.TrayBusy())
			v.e.TrayWait = 10 * time.Millisecond
		}, methods: []string{update, detach, attach, define}},
		{name: "change: stale tray on SCSI, drive replaced", recovery: metrics.RecoveryReplace, scsi: true, bus: domxml.BusSCSI, drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.FailNext(update, libvirtxtest.TrayBusy())
			v.f.SetLiveXML(v.uuid, withTrayOpen(t, v.f.XML(v.uuid)))
		}, methods: []string{update, detach, attach, define}},
		{name: "change: replacing, detach refused", recovery: metrics.RecoveryReplace, scsi: true, bus: domxml.BusSCSI, drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.FailNext(update, libvirtxtest.TrayBusy())
			v.f.FailNext(detach, libvirtxtest.Failed("device busy"))
			v.f.SetLiveXML(v.uuid, withTrayOpen(t, v.f.XML(v.uuid)))
		}, code: result.CodeLibvirt, methods: []string{update, detach}, msg: "replacing the drive: detach"},
		{name: "change: replacing, attach refused", recovery: metrics.RecoveryReplace, scsi: true, bus: domxml.BusSCSI, drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.FailNext(update, libvirtxtest.TrayBusy())
			v.f.FailNext(attach, libvirtxtest.Failed("no free unit"))
			v.f.SetLiveXML(v.uuid, withTrayOpen(t, v.f.XML(v.uuid)))
		}, code: result.CodeLibvirt, methods: []string{update, detach, attach}, msg: "attaching the new one failed"},
		{name: "change: stale tray on IDE just after start, reset", recovery: metrics.RecoveryReset, drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.FailNext(update, libvirtxtest.TrayBusy())
			v.f.SetLiveXML(v.uuid, withTrayOpen(t, v.f.XML(v.uuid)))
			v.e.Starts.Note(v.uuid, time.Now())
		}, methods: []string{update, reset, update, define}},
		// the change succeeds but libvirt keeps recording the tray open
		// (the guest's reset closed it without an event): repaired by a
		// reset just after start, left with a warning later on
		{name: "change: done, tray recorded open just after start, reset", recovery: metrics.RecoveryReset, drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.SetLiveXML(v.uuid, withTrayOpen(t, v.f.XML(v.uuid)))
			v.e.Starts.Note(v.uuid, time.Now())
			v.e.TrayWait = 10 * time.Millisecond
		}, methods: []string{update, reset, define},
			check: func(t *testing.T, v env, r result.Result) {
				live, _ := v.f.LiveXML(context.Background(), v.uuid)
				if p, found, _ := domxml.FindPayload(live); !found || p.TrayOpen {
					t.Errorf("live drive %+v (found %v), want the tray recorded shut after the reset", p, found)
				}
			}},
		{name: "change: done, tray recorded open on a domain up for long, no reset", drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.SetLiveXML(v.uuid, withTrayOpen(t, v.f.XML(v.uuid)))
			v.e.Starts.Note(v.uuid, time.Now().Add(-time.Hour))
			v.e.TrayWait = 10 * time.Millisecond
		}, methods: []string{update, define}},
		{name: "change: done, tray recorded open on SCSI, not waited for", scsi: true, bus: domxml.BusSCSI, drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.SetLiveXML(v.uuid, withTrayOpen(t, v.f.XML(v.uuid)))
			v.e.Starts.Note(v.uuid, time.Now())
		}, methods: []string{update, define}},
		{name: "change: stale tray on IDE, reset refused", recovery: metrics.RecoveryReset, drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.FailNext(update, libvirtxtest.TrayBusy())
			v.f.FailNext(reset, libvirtxtest.Failed("reset failed"))
			v.f.SetLiveXML(v.uuid, withTrayOpen(t, v.f.XML(v.uuid)))
			v.e.Starts.Note(v.uuid, time.Now())
		}, code: result.CodeLibvirt, methods: []string{update, reset}, msg: "resetting the domain"},
		{name: "change: stale tray on IDE of a domain up for long", drive: true, active: true, setup: func(t *testing.T, v env) {
			v.f.FailNext(update, libvirtxtest.TrayBusy())
			v.f.SetLiveXML(v.uuid, withTrayOpen(t, v.f.XML(v.uuid)))
			v.e.Starts.Note(v.uuid, time.Now().Add(-time.Hour))
		}, code: result.CodeMediaLocked, methods: []string{update}, msg: "virsh reset"},
		// detach
		{name: "detach: no drive, no recipe", action: "detach", methods: nil},
		{name: "detach: stopped", action: "detach", drive: true, methods: []string{define},
			check: func(t *testing.T, v env, r result.Result) {
				if _, found, _ := domxml.FindPayload(v.f.XML(v.uuid)); found {
					t.Error("payload drive still defined")
				}
				if ents, _ := os.ReadDir(v.e.PayloadDir); len(ents) != 0 {
					t.Errorf("%d images left after detach", len(ents))
				}
			}},
		{name: "detach: running CD-ROM ejected", action: "detach", drive: true, active: true, methods: []string{update, define},
			check: func(t *testing.T, v env, r result.Result) {
				c := v.f.Calls()
				for _, x := range c {
					// the live drive only (the definition loses the drive
					// by a redefine), forced as every live media change
					if want := libvirtx.DOMAIN_DEVICE_MODIFY_LIVE | libvirtx.DOMAIN_DEVICE_MODIFY_FORCE; x.Method == update && x.Flags != want {
						t.Errorf("eject flags %v, want %v (live, forced)", x.Flags, want)
					}
				}
			}},
		{name: "detach: running CD-ROM, stale tray just after start, reset, ejected", action: "detach", recovery: metrics.RecoveryReset, drive: true, active: true,
			setup: func(t *testing.T, v env) {
				v.f.FailNext(update, libvirtxtest.TrayBusy())
				v.f.SetLiveXML(v.uuid, withTrayOpen(t, v.f.XML(v.uuid)))
				v.e.Starts.Note(v.uuid, time.Now())
			}, methods: []string{update, reset, update, define}},
		{name: "detach: running CD-ROM, stale tray on a domain up for long", action: "detach", drive: true, active: true,
			setup: func(t *testing.T, v env) {
				v.f.FailNext(update, libvirtxtest.TrayBusy())
				v.f.SetLiveXML(v.uuid, withTrayOpen(t, v.f.XML(v.uuid)))
				v.e.Starts.Note(v.uuid, time.Now().Add(-time.Hour))
			}, code: result.CodeMediaLocked, methods: []string{update}, msg: "virsh reset"},
		{name: "detach: running SCSI CD-ROM unplugged", action: "detach", scsi: true, bus: domxml.BusSCSI, drive: true, active: true, methods: []string{detach, define},
			check: func(t *testing.T, v env, r result.Result) {
				for _, x := range v.f.Calls() {
					if x.Method == detach && x.Flags != libvirtx.DOMAIN_DEVICE_MODIFY_LIVE {
						t.Errorf("unplug flags %v, want live only", x.Flags)
					}
				}
			}},
		// (leftLive keeps the recipe: it alone goes)
		{name: "detach: running, drive only live and ejected: no device change", action: "detach", drive: true, active: true,
			setup: func(t *testing.T, v env) { leftLive(t, v.f, v.uuid) }, methods: []string{define}},
		{name: "detach: running, drive only live with a medium: ejected", action: "detach", drive: true, active: true,
			setup: func(t *testing.T, v env) {
				x := v.f.XML(v.uuid)
				saved, err := withoutPayload(x)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := v.f.DefineXML(context.Background(), saved); err != nil {
					t.Fatal(err)
				}
				v.f.SetLiveXML(v.uuid, x)
			}, methods: []string{update, define},
			check: func(t *testing.T, v env, r result.Result) {
				if r.Device == nil || r.Device.Target != "hda" {
					t.Errorf("device %+v, want the live drive hda", r.Device)
				}
				if ents, _ := os.ReadDir(v.e.PayloadDir); len(ents) != 0 {
					t.Errorf("%d images left after detach", len(ents))
				}
			}},
		{name: "detach: running disk unplugged", action: "detach", drive: true, driveM: "vfat", active: true, methods: []string{detach, define}},
		{name: "detach: eject refused", action: "detach", drive: true, active: true, setup: func(t *testing.T, v env) { v.f.FailNext(update, libvirtxtest.Failed("tray locked")) },
			code: result.CodeLibvirt, methods: []string{update}, msg: "ejecting"},
		{name: "detach: unplug refused", action: "detach", drive: true, driveM: "vfat", active: true, setup: func(t *testing.T, v env) { v.f.FailNext(detach, libvirtxtest.Failed("busy")) },
			code: result.CodeLibvirt, methods: []string{detach}, msg: "unplugging"},
		{name: "detach: redefine refused", action: "detach", drive: true, setup: func(t *testing.T, v env) { v.f.FailNext(define, libvirtxtest.Failed("XML error")) },
			code: result.CodeLibvirt, methods: []string{define}, msg: "without the payload drive"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("fake-%d", i)
			f, d, e := fakeJobEngine(t, fakeDomainXML(name, c.scsi))
			if c.bus != "" {
				e.Bus = c.bus
			}
			met := e.Metrics
			extra := ""
			doc := func(host, media, action string) string {
				s := fmt.Sprintf(`{"version":1,"domain":%q,"hostname":%q`, name, host)
				if media != "" {
					s += fmt.Sprintf(`,"media":%q`, media)
				}
				if action != "" {
					s += fmt.Sprintf(`,"action":%q`, action)
				}
				return s + extra + "}"
			}
			if c.drive {
				if r := runDoc(t, e, doc("earlier", c.driveM, "attach"), "earlier"); r.State != result.StateDone {
					t.Fatalf("earlier job: %s %+v", r.State, r.Error)
				}
			}
			if c.active {
				f.SetActive(d.UUID, true)
			}
			v := env{f: f, e: e, uuid: d.UUID}
			if c.setup != nil {
				c.setup(t, v)
			}
			f.ResetCalls()
			host, media := "now", c.media
			if c.same {
				host, media = "earlier", c.driveM
			}
			action := c.action
			if action == "" {
				action = "attach"
			}
			extra = c.extra
			r := runDoc(t, e, doc(host, media, action), "job")
			code := ""
			if r.Error != nil {
				code = r.Error.Code
			}
			if code != c.code {
				t.Fatalf("result %s %+v, want code %q", r.State, r.Error, c.code)
			}
			if c.msg != "" && (r.Error == nil || !strings.Contains(r.Error.Message, c.msg)) {
				t.Errorf("error %+v does not say %q", r.Error, c.msg)
			}
			if got := f.Methods(); !reflect.DeepEqual(got, c.methods) && !(len(got) == 0 && len(c.methods) == 0) {
				t.Errorf("libvirt changes %q, want %q", got, c.methods)
			}
			for _, action := range []string{metrics.RecoveryReplace, metrics.RecoveryReset} {
				want := "0"
				if action == c.recovery {
					want = "1"
				}
				if got := sample(t, met, `vmpayload_media_recoveries_total{action="`+action+`"}`); got != want {
					t.Errorf("media recoveries %s = %s, want %s", action, got, want)
				}
			}
			if c.check != nil {
				c.check(t, v, r)
			}
		})
	}
}

// checkIgnitionImage fails unless r attached an image labelled label whose
// only file, at path, is an Ignition config that Ignition parses cleanly.
func checkIgnitionImage(t *testing.T, r result.Result, label, path string) {
	t.Helper()
	if r.Payload == nil || r.Payload.Format != "ignition" || r.Payload.Label != label {
		t.Fatalf("payload %+v", r.Payload)
	}
	info, err := image.Inspect(r.Payload.Path)
	if err != nil || len(info.Files) != 1 || info.Files[0].Path != path {
		t.Fatalf("image %+v: %v", info, err)
	}
	raw, err := image.ReadFile(r.Payload.Path, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, rpt, err := ignconfig.Parse(raw); err != nil || len(rpt.Entries) != 0 {
		t.Errorf("config.Parse: %v %s", err, rpt.String())
	}
}

// withoutPayload returns domainXML without its payload drive.
func withoutPayload(domainXML string) (string, error) {
	ed, err := domxml.NewEdit(domainXML)
	if err != nil {
		return "", err
	}
	if _, err := ed.RemovePayloadDrive(); err != nil {
		return "", err
	}
	return ed.XML()
}
