package domxml

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestChannelPath(t *testing.T) {
	const name = "org.example.report.0"
	ch := func(typ, path, tgtType, tgtName string) string {
		s := "<channel type='" + typ + "'>"
		if path != "" {
			s += "<source mode='bind' path='" + path + "'/>"
		}
		return s + "<target type='" + tgtType + "' name='" + tgtName + "'/></channel>"
	}
	dom := func(devices string) string {
		return "<domain type='kvm'><name>d</name><devices><disk type='file'/>" + devices + "</devices></domain>"
	}
	cases := []struct {
		name, xml string
		want      string // "" : not found
		bad       bool   // malformed
	}{
		{"found", dom(ch("unix", "/run/a.sock", "virtio", name)), "/run/a.sock", false},
		{"no channel", dom(""), "", false},
		{"other name", dom(ch("unix", "/run/a.sock", "virtio", "org.qemu.guest_agent.0")), "", false},
		{"not unix", dom(ch("pty", "/dev/pts/3", "virtio", name)), "", false},
		{"no path yet", dom(ch("unix", "", "virtio", name)), "", false},
		{"not virtio", dom(ch("unix", "/run/a.sock", "guestfwd", name)), "", false},
		{"first without path, second with", dom(ch("unix", "", "virtio", name) + ch("unix", "/run/b.sock", "virtio", name)), "/run/b.sock", false},
		{"two with paths: the first", dom(ch("unix", "/run/a.sock", "virtio", name) + ch("unix", "/run/b.sock", "virtio", name)), "/run/a.sock", false},
		{"outside devices", "<domain><name>d</name>" + ch("unix", "/run/a.sock", "virtio", name) + "<devices/></domain>", "", false},
		{"source after target", dom("<channel type='unix'><target type='virtio' name='" + name + "'/><source path='/run/c.sock'/></channel>"), "/run/c.sock", false},
		{"second source ignored", dom("<channel type='unix'><source/><source path='/run/c.sock'/><target type='virtio' name='" + name + "'/></channel>"), "", false},
		{"nested target ignored", dom("<channel type='unix'><source path='/run/c.sock'/><x><target type='virtio' name='" + name + "'/></x></channel>"), "", false},
		{"after a declaration", "<?xml version='1.0'?>\n" + dom(ch("unix", "/run/a.sock", "virtio", name)), "/run/a.sock", false},
		{"malformed", "<domain><devices>" + ch("unix", "/run/a.sock", "virtio", name) + "</domain>", "", true},
		{"wrong root", "<network/>", "", true},
		{"prefixed devices", "<domain xmlns:q='urn:q'><q:devices>" + ch("unix", "/run/a.sock", "virtio", name) + "</q:devices></domain>", "/run/a.sock", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Read(tc.xml)
			if tc.bad {
				if !errors.Is(err, ErrInvalidXML) {
					t.Fatalf("err = %v, want ErrInvalidXML", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p, ok := d.ChannelPath(name); p != tc.want || ok != (tc.want != "") {
				t.Fatalf("ChannelPath = %q, %v; want %q", p, ok, tc.want)
			}
		})
	}
}

// TestChannelPathLiveQEMU reads the live XML of a domain started on
// qemu:///system (libvirt 9.0, Debian 12; testdata/live-qemu.xml): the
// document the agent reads once per started domain: the channel's socket
// is the one libvirt generated.
func TestChannelPathLiveQEMU(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "live-qemu.xml"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Read(string(b))
	if err != nil {
		t.Fatal(err)
	}
	p, ok := d.ChannelPath("org.vmpayload.0")
	if !ok || p != "/var/lib/libvirt/qemu/channel/target/domain-53-vmpx-live-sample/org.vmpayload.0" {
		t.Fatalf("ChannelPath = %q, %v", p, ok)
	}
}

// BenchmarkChannelPath is the agent's reading of a started domain's live
// XML.
func BenchmarkChannelPath(b *testing.B) {
	x, err := os.ReadFile(filepath.Join("testdata", "live-qemu.xml"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		d, err := Read(string(x))
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := d.ChannelPath("org.vmpayload.0"); !ok {
			b.Fatal("no channel")
		}
	}
}
