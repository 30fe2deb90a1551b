package domxml

import "github.com/beevik/etree"

// A guest channel is a virtio-serial port whose host end is a unix socket:
//
//	<channel type='unix'>
//	  <source mode='bind'/>
//	  <target type='virtio' name='NAME'/>
//	</channel>
//
// The source has no path: libvirt generates one at start in its own channel
// directory (/var/lib/libvirt/qemu/channel/target/domain-N-NAME/NAME),
// owned and labelled for QEMU, and shows it in the live XML (ChannelPath).
// In the guest the port is /dev/virtio-ports/NAME.

// findChannels returns the <channel> elements whose virtio target is name.
func findChannels(root *etree.Element, name string) []*etree.Element {
	var out []*etree.Element
	for _, ch := range root.FindElements("./devices/channel") {
		t := ch.SelectElement("target")
		if t != nil && t.SelectAttrValue("type", "") == "virtio" && t.SelectAttrValue("name", "") == name {
			out = append(out, ch)
		}
	}
	return out
}

// guestChannel is the <channel> element of the guest channel name.
func guestChannel(name string) *etree.Element {
	ch := etree.NewElement("channel")
	ch.CreateAttr("type", "unix")
	ch.CreateElement("source").CreateAttr("mode", "bind")
	t := ch.CreateElement("target")
	t.CreateAttr("type", "virtio")
	t.CreateAttr("name", name)
	return ch
}

// ChannelPath returns the host socket of the unix virtio channel named name
// in a running domain's live XML ("" and false when the domain has no such
// channel, or libvirt has not given it a path).
func (d *Document) ChannelPath(name string) (string, bool) {
	for _, ch := range findChannels(d.root, name) {
		if ch.SelectAttrValue("type", "") != "unix" {
			continue
		}
		if src := ch.SelectElement("source"); src != nil {
			if p := src.SelectAttrValue("path", ""); p != "" {
				return p, true
			}
		}
	}
	return "", false
}
