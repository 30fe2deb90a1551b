package fwcfg_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/delivery/deliverytest"
	"github.com/vmpayload/vmpayload/agent/delivery/fwcfg"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/libvirtx/libvirtxtest"
)

const dir = deliverytest.Dir

// domain is a shut-off domain whose definition holds sysinfo (a fwcfg
// sysinfo's entries, "" for none).
func domain(sysinfo string) string {
	if sysinfo != "" {
		sysinfo = "<sysinfo type='fwcfg'>" + sysinfo + "</sysinfo>"
	}
	return "<domain type='kvm'><name>dlv-fw</name><uuid>0a1b2c3d-0000-4000-8000-000000000042</uuid><memory unit='MiB'>64</memory>" + sysinfo +
		"<os><type arch='x86_64' machine='pc'>hvm</type></os><features><acpi/></features><devices></devices></domain>"
}

func entry(name, file string) string { return "<entry name='" + name + "' file='" + file + "'/>" }

func setup(t *testing.T, def string, active bool) (*libvirtxtest.Fake, *delivery.Env, libvirtx.DomainInfo) {
	t.Helper()
	return deliverytest.Setup(t, def, active)
}

func named(file string, names ...string) []delivery.Named {
	var out []delivery.Named
	for _, n := range names {
		out = append(out, delivery.Named{Name: n, File: file})
	}
	return out
}

// TestAttachSet: a payload is a set of (fw_cfg name → file) entries, not
// only Ignition's one file under two names; vmpayload's entries of names
// the new set lacks go, a user's own entries stay, and the files the
// definition no longer names are the caller's to supersede.
func TestAttachSet(t *testing.T) {
	ign, ign2 := dir+"/u-1.ign", dir+"/u-2.ign"
	a, b := dir+"/u-a.cred", dir+"/u-b.cred"
	user := entry("opt/user/own", "/etc/own.bin")
	tests := []struct {
		name      string
		before    string
		set       []delivery.Named
		wantNames []string // managed names in the definition after
		wantGone  []string // Attached.Supersede
		wantUser  bool
	}{
		{"ignition into empty domain", "", named(ign, domxml.IgnitionFwCfgNames...), domxml.IgnitionFwCfgNames, nil, false},
		{"ignition replaces ignition", entry(domxml.IgnitionFwCfgNames[0], ign) + entry(domxml.IgnitionFwCfgNames[1], ign) + user,
			named(ign2, domxml.IgnitionFwCfgNames...), domxml.IgnitionFwCfgNames, []string{ign}, true},
		{"same entries again", entry(domxml.IgnitionFwCfgNames[0], ign) + entry(domxml.IgnitionFwCfgNames[1], ign),
			named(ign, domxml.IgnitionFwCfgNames...), domxml.IgnitionFwCfgNames, nil, false},
		{"two files, one name each", user, append(named(a, domxml.IgnitionFwCfgNames[0]), named(b, domxml.IgnitionFwCfgNames[1])...),
			domxml.IgnitionFwCfgNames, nil, true},
		{"a smaller set drops the name it lacks", entry(domxml.IgnitionFwCfgNames[0], a) + entry(domxml.IgnitionFwCfgNames[1], b),
			named(a, domxml.IgnitionFwCfgNames[0]), domxml.IgnitionFwCfgNames[:1], []string{b}, false},
		{"a user's file under a managed name is replaced, not listed as ours", entry(domxml.IgnitionFwCfgNames[0], "/etc/mine.ign"),
			named(ign, domxml.IgnitionFwCfgNames...), domxml.IgnitionFwCfgNames, []string{"/etc/mine.ign"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, env, dom := setup(t, domain(tt.before), false)
			d := fwcfg.New(env)
			var r result.Result
			dropped := 0
			p := &delivery.Payload{Path: tt.set[0].File, Named: tt.set, Recipe: "", DropOthers: func(*domxml.Edit) error { dropped++; return nil }}
			out, err := d.Attach(context.Background(), dom, p, &r)
			if err != nil {
				t.Fatal(err)
			}
			if dropped != 1 {
				t.Errorf("DropOthers called %d times, want 1", dropped)
			}
			ents, err := domxml.FwCfgEntries(f.XML(dom.UUID))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			hasUser := false
			for _, en := range ents {
				if fwcfg.Managed(en.Name) {
					i := slices.IndexFunc(tt.set, func(n delivery.Named) bool { return n.Name == en.Name })
					if i < 0 || tt.set[i].File != en.File {
						t.Errorf("entry %s → %s is not in the set %v", en.Name, en.File, tt.set)
					}
					got = append(got, en.Name)
				}
				hasUser = hasUser || en.Name == "opt/user/own"
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.wantNames))
			if !slices.Equal(got, want) {
				t.Errorf("managed entries %v, want %v", got, want)
			}
			if hasUser != tt.wantUser {
				t.Errorf("user's entry kept: %v, want %v", hasUser, tt.wantUser)
			}
			if !slices.Equal(out.Supersede, tt.wantGone) {
				t.Errorf("Supersede %v, want %v", out.Supersede, tt.wantGone)
			}
			if !slices.Equal(r.FwCfg, delivery.Names(tt.set)) || r.DomainState != "shut off" || r.Notice != "" {
				t.Errorf("result fw_cfg %v state %q notice %q", r.FwCfg, r.DomainState, r.Notice)
			}
			if owned := d.Files(f.XML(dom.UUID)); len(owned) == 0 || slices.Contains(owned, "/etc/own.bin") {
				t.Errorf("Files %v: want the set's files only", owned)
			}
		})
	}
}

// TestAttachRunning: a running domain's guest sees new entries at its
// next cold start (the notice), unless its QEMU was started with these
// very entries (Seen, no notice).
func TestAttachRunning(t *testing.T) {
	ign, ign2 := dir+"/u-1.ign", dir+"/u-2.ign"
	both := entry(domxml.IgnitionFwCfgNames[0], ign) + entry(domxml.IgnitionFwCfgNames[1], ign)
	tests := []struct {
		name     string
		file     string
		wantSeen bool
	}{
		{"started with it", ign, true},
		{"a new config", ign2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, env, dom := setup(t, domain(both), true)
			var r result.Result
			out, err := fwcfg.New(env).Attach(context.Background(), dom, &delivery.Payload{Path: tt.file, Named: named(tt.file, domxml.IgnitionFwCfgNames...)}, &r)
			if err != nil {
				t.Fatal(err)
			}
			if out.Seen != tt.wantSeen || out.Live == nil || !out.Live.Known {
				t.Errorf("Seen %v (live %+v), want %v", out.Seen, out.Live, tt.wantSeen)
			}
			wantNotice := ""
			if !tt.wantSeen {
				wantNotice = fwcfg.NoticeNextColdStart
			}
			if r.Notice != wantNotice || r.DomainState != "running" {
				t.Errorf("notice %q state %q, want %q running", r.Notice, r.DomainState, wantNotice)
			}
		})
	}
}

// TestStartedWith: the running QEMU has a payload when its live fw_cfg
// entries among the managed names are exactly the set's.
func TestStartedWith(t *testing.T) {
	n0, n1 := domxml.IgnitionFwCfgNames[0], domxml.IgnitionFwCfgNames[1]
	set := append(named("/p/a", n0), named("/p/b", n1)...)
	tests := []struct {
		name string
		live *delivery.Live
		want bool
	}{
		{"unread", &delivery.Live{}, false},
		{"exactly", &delivery.Live{Known: true, FwCfg: []domxml.FwCfgEntry{{Name: n0, File: "/p/a"}, {Name: n1, File: "/p/b"}, {Name: "opt/user/x", File: "/x"}}}, true},
		{"one missing", &delivery.Live{Known: true, FwCfg: []domxml.FwCfgEntry{{Name: n0, File: "/p/a"}}}, false},
		{"other file", &delivery.Live{Known: true, FwCfg: []domxml.FwCfgEntry{{Name: n0, File: "/p/a"}, {Name: n1, File: "/p/c"}}}, false},
	}
	for _, tt := range tests {
		if got := fwcfg.StartedWith(tt.live, set); got != tt.want {
			t.Errorf("%s: StartedWith %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestDetach: vmpayload's entries leave the edit, a user's stay; on a
// running domain started with them the result will say the guest keeps
// its copy until its next cold start.
func TestDetach(t *testing.T) {
	ign := dir + "/u-1.ign"
	ours := entry(domxml.IgnitionFwCfgNames[0], ign) + entry(domxml.IgnitionFwCfgNames[1], ign)
	user := entry("opt/user/own", "/etc/own.bin")
	tests := []struct {
		name        string
		entries     string
		active      bool
		wantChanged bool
		wantNotice  string
	}{
		{"none", user, false, false, ""},
		{"stopped", ours + user, false, true, ""},
		{"running", ours + user, true, true, fwcfg.NoticeDetachRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, env, dom := setup(t, domain(tt.entries), tt.active)
			ed, err := domxml.NewEdit(f.XML(dom.UUID))
			if err != nil {
				t.Fatal(err)
			}
			dt, err := fwcfg.New(env).Detach(context.Background(), dom, ed, &result.Result{})
			if err != nil {
				t.Fatal(err)
			}
			if dt.Changed != tt.wantChanged || dt.Notice != tt.wantNotice || dt.Drive {
				t.Errorf("Detached %+v, want changed %v notice %q", dt, tt.wantChanged, tt.wantNotice)
			}
			x, _ := ed.XML()
			if strings.Contains(x, ign) || !strings.Contains(x, "/etc/own.bin") {
				t.Errorf("after the detach:\n%s", x)
			}
			if tt.wantChanged && !slices.Equal(dt.Supersede, []string{ign, ign}) {
				t.Errorf("Supersede %v", dt.Supersede)
			}
		})
	}
}

// TestReachOf: which domains' guests can read fw_cfg.
func TestReachOf(t *testing.T) {
	tests := []struct {
		plat domxml.Platform
		want fwcfg.Reach
	}{
		{domxml.Platform{Arch: "x86_64", ACPI: true}, fwcfg.Reachable},
		{domxml.Platform{Arch: "x86_64"}, fwcfg.NoACPI},
		{domxml.Platform{Arch: "aarch64"}, fwcfg.Reachable},
		{domxml.Platform{Arch: "s390x"}, fwcfg.NoDevice},
		{domxml.Platform{Arch: "ppc64le", ACPI: true}, fwcfg.NoDevice},
	}
	for _, tt := range tests {
		if got := fwcfg.ReachOf(tt.plat); got != tt.want {
			t.Errorf("ReachOf(%+v) = %d, want %d", tt.plat, got, tt.want)
		}
	}
}

// TestManagedCredentials: systemd credential names are vmpayload's to
// manage (with a file in the payload directory), as Ignition's are; other
// opt/ names are the user's.
func TestManagedCredentials(t *testing.T) {
	for name, want := range map[string]bool{
		domxml.IgnitionFwCfgNames[0]:                  true,
		domxml.CredentialFwCfgName("system.hostname"): true,
		"opt/io.systemd.credentialsX/a":               false,
		"opt/user/own":                                false,
	} {
		if fwcfg.Managed(name) != want {
			t.Errorf("Managed(%q) = %v", name, !want)
		}
	}
}
