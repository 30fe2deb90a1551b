package smbios_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/delivery/deliverytest"
	"github.com/vmpayload/vmpayload/agent/delivery/smbios"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/libvirtx/libvirtxtest"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/testenv"
)

func domain(extra, osExtra string) string {
	return "<domain type='kvm'><name>cint-sm</name><uuid>0a1b2c3d-0000-4000-8000-000000000043</uuid><memory unit='MiB'>64</memory>" + extra +
		"<os><type arch='x86_64' machine='pc'>hvm</type>" + osExtra + "</os><devices></devices></domain>"
}

// rendered returns the values and recipe element of a credentials job
// (members after version and format).
func rendered(t *testing.T, members string) ([]domxml.Credential, string) {
	t.Helper()
	_, c, rep := payload.Check([]byte(`{"version":1,"format":"credentials","credentials_delivery":"smbios",`+members+`}`), payload.CheckOptions{Secrets: true, Build: true})
	if !rep.OK() {
		t.Fatal(rep.Err())
	}
	rd, err := payload.Render(c, payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := recipe.NewValues(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := seal.LoadOrCreate(filepath.Join(t.TempDir(), "key"))
	if err != nil {
		t.Fatal(err)
	}
	el, err := rc.Element(keys)
	if err != nil {
		t.Fatal(err)
	}
	return rd.Inline(), el
}

func setup(t *testing.T, def string, active bool) (*libvirtxtest.Fake, delivery.Delivery, libvirtx.DomainInfo) {
	t.Helper()
	f, env, dom := deliverytest.Setup(t, def, active)
	return f, smbios.New(env), dom
}

// TestAttach: the job's credentials become OEM strings with
// <smbios mode='sysinfo'/> and the recipe names them; the user's own
// sysinfo and OEM strings stay; a second job replaces vmpayload's strings
// only; a running domain's result says the next cold start (and the
// first-boot condition); a refused edit fails naming
// credentials_delivery and changes nothing.
func TestAttach(t *testing.T) {
	user := "<sysinfo type='smbios'><system><entry name='manufacturer'>Ex</entry></system><oemStrings><entry>myapp:role=web</entry></oemStrings></sysinfo>"
	for _, c := range []struct {
		name           string
		def            string
		active         bool
		first, second  string // job members; second "" for one job
		want, notWant  []string
		notice, errStr string
	}{
		{"empty domain", domain("", ""), false, `"hostname":"h1"`, "",
			[]string{"<entry>io.systemd.credential:system.hostname=h1</entry>", "<smbios mode='sysinfo'/>", recipe.Namespace}, nil, "", ""},
		{"user's sysinfo kept, second job replaces", domain(user, ""), false, `"hostname":"h1","timezone":"UTC"`, `"hostname":"h2"`,
			[]string{"<entry>myapp:role=web</entry>", "<entry name='manufacturer'>Ex</entry>", "system.hostname=h2</entry>"},
			[]string{"system.hostname=h1", "firstboot.timezone"}, "", ""},
		{"running, first boot", domain("", ""), true, `"timezone":"UTC"`, "", []string{"firstboot.timezone=UTC"}, nil, smbios.NoticeFirstBootOnly, ""},
		{"running", domain("", ""), true, `"motd":"m"`, "", []string{"login.motd=m"}, nil, smbios.NoticeNextColdStart, ""},
		{"user's own credential", domain("<sysinfo type='smbios'><oemStrings><entry>io.systemd.credential:system.hostname=mine</entry></oemStrings></sysinfo>", ""), false,
			`"hostname":"h1"`, "", nil, nil, "", `already passes credential "system.hostname"`},
		{"smbios mode host", domain("", "<smbios mode='host'/>"), false, `"hostname":"h1"`, "", nil, nil, "", `mode "sysinfo"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, d, dom := setup(t, c.def, c.active)
			before := f.XML(dom.UUID)
			var r result.Result
			var err error
			for _, m := range []string{c.first, c.second} {
				if m == "" {
					continue
				}
				vals, el := rendered(t, m)
				dom, _ = f.Domain(context.Background(), dom.UUID)
				r = result.Result{}
				_, err = d.Attach(context.Background(), dom, &delivery.Payload{Values: vals, Recipe: el}, &r)
			}
			x := f.XML(dom.UUID)
			if c.errStr != "" {
				var fl *delivery.Failure
				if !errors.As(err, &fl) || fl.Field != "credentials_delivery" || !strings.Contains(err.Error(), c.errStr) {
					t.Fatalf("err %v, want a failure on credentials_delivery with %q", err, c.errStr)
				}
				if x != before {
					t.Errorf("the refused attach changed the definition")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			testenv.Contains(t, "the definition", x, c.want, c.notWant)
			if c.notice != "" && (!strings.Contains(r.Notice, c.notice) || r.TakesEffect != result.TakesEffectNextColdStart) {
				t.Errorf("notice %q takes_effect %q, want %q", r.Notice, r.TakesEffect, c.notice)
			}
			if c.notice == "" && r.Notice != "" {
				t.Errorf("notice %q", r.Notice)
			}
			if strings.Contains(r.Notice, smbios.NoticeFirstBootOnly) != (c.notice == smbios.NoticeFirstBootOnly) {
				t.Errorf("first-boot notice: %q", r.Notice)
			}
		})
	}
}

// TestDropDetach: Drop and Detach remove only the OEM strings the recipe
// names (the user's stay, and with them the sysinfo and its mode); with
// the last string vmpayload set, the sysinfo and <smbios mode='sysinfo'/>
// it added go.
func TestDropDetach(t *testing.T) {
	for _, c := range []struct {
		name, def string
		keep      []string
		gone      []string
	}{
		{"only vmpayload's", domain("", ""), nil, []string{"<sysinfo", "<smbios"}},
		{"the user's kept", domain("<sysinfo type='smbios'><oemStrings><entry>myapp:role=web</entry></oemStrings></sysinfo>", ""),
			[]string{"<entry>myapp:role=web</entry>", "<smbios mode='sysinfo'/>"}, []string{"io.systemd.credential"}},
	} {
		for _, op := range []string{"drop", "detach"} {
			t.Run(c.name+"/"+op, func(t *testing.T) {
				f, d, dom := setup(t, c.def, false)
				vals, el := rendered(t, `"hostname":"h1","motd":"hi\n"`)
				if _, err := d.Attach(context.Background(), dom, &delivery.Payload{Values: vals, Recipe: el}, &result.Result{}); err != nil {
					t.Fatal(err)
				}
				ed, err := domxml.NewEdit(f.XML(dom.UUID))
				if err != nil {
					t.Fatal(err)
				}
				if op == "drop" {
					err = d.Drop(ed, dom)
				} else {
					var dt delivery.Detached
					dt, err = d.Detach(context.Background(), dom, ed, &result.Result{})
					if !dt.Changed {
						t.Error("detach changed nothing")
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				x, _ := ed.XML()
				testenv.Contains(t, "the definition", x, c.keep, c.gone)
				if d.Files(x) != nil {
					t.Error("Files of an SMBIOS payload")
				}
			})
		}
	}
}
