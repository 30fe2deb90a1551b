package domxml

import (
	"errors"
	"testing"
)

// channelPathTree is ChannelPath as it was, over the etree document: the
// reference the streaming pass must agree with.
func channelPathTree(liveXML, name string) (string, bool, error) {
	_, root, err := parse(liveXML)
	if err != nil {
		return "", false, err
	}
	for _, ch := range findChannels(root, name) {
		if ch.SelectAttrValue("type", "") != "unix" {
			continue
		}
		if src := ch.SelectElement("source"); src != nil {
			if p := src.SelectAttrValue("path", ""); p != "" {
				return p, true, nil
			}
		}
	}
	return "", false, nil
}

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
		{"malformed", "<domain><devices>" + ch("unix", "/run/a.sock", "virtio", name) + "</domain>", "", true},
		{"wrong root", "<network/>", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, ok, err := ChannelPath(tc.xml, name)
			if tc.bad {
				if !errors.Is(err, ErrInvalidXML) {
					t.Fatalf("err = %v, want ErrInvalidXML", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != tc.want || ok != (tc.want != "") {
				t.Fatalf("ChannelPath = %q, %v; want %q", p, ok, tc.want)
			}
			rp, rok, rerr := channelPathTree(tc.xml, name)
			if rerr != nil || rp != p || rok != ok {
				t.Fatalf("the tree reading says %q, %v, %v; the streaming one %q, %v", rp, rok, rerr, p, ok)
			}
		})
	}
}
