package domxml

import (
	"fmt"

	"github.com/beevik/etree"
)

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

// SetGuestChannel returns domainXML with a unix virtio channel named name
// (see above). A domain that already has a channel of that name is returned
// unchanged with added false.
func SetGuestChannel(domainXML, name string) (string, bool, error) {
	if name == "" {
		return "", false, fmt.Errorf("adding the guest channel: no channel name")
	}
	doc, root, err := parse(domainXML)
	if err != nil {
		return "", false, err
	}
	if len(findChannels(root, name)) > 0 {
		return domainXML, false, nil
	}
	devices := root.SelectElement("devices")
	if devices == nil {
		devices = root.CreateElement("devices")
	}
	ch := etree.NewElement("channel")
	ch.CreateAttr("type", "unix")
	ch.CreateElement("source").CreateAttr("mode", "bind")
	t := ch.CreateElement("target")
	t.CreateAttr("type", "virtio")
	t.CreateAttr("name", name)
	insertDevice(devices, ch, indentStep(root))
	x, err := serialize(doc)
	return x, true, err
}

// RemoveGuestChannel returns domainXML without the virtio channels named
// name; removed reports whether there were any (when not, the document is
// returned unchanged).
func RemoveGuestChannel(domainXML, name string) (string, bool, error) {
	doc, root, err := parse(domainXML)
	if err != nil {
		return "", false, err
	}
	chs := findChannels(root, name)
	if len(chs) == 0 {
		return domainXML, false, nil
	}
	for _, ch := range chs {
		removeWithIndent(ch.Parent(), ch)
	}
	x, err := serialize(doc)
	return x, true, err
}

// HasGuestChannel reports whether domainXML has a virtio channel named name.
func HasGuestChannel(domainXML, name string) (bool, error) {
	_, root, err := parse(domainXML)
	if err != nil {
		return false, err
	}
	return len(findChannels(root, name)) > 0, nil
}

// ChannelPath returns the host socket of the unix virtio channel named name
// in a running domain's live XML ("" and false when the domain has no such
// channel, or libvirt has not given it a path).
func ChannelPath(liveXML, name string) (string, bool, error) {
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
