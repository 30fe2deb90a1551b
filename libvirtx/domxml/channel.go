package domxml

import (
	"encoding/xml"
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
	ed, err := NewEdit(domainXML)
	if err != nil {
		return "", false, err
	}
	added, err := ed.SetGuestChannel(name)
	if err != nil {
		return "", false, err
	}
	x, err := ed.XML()
	return x, added, err
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

// RemoveGuestChannel returns domainXML without the virtio channels named
// name; removed reports whether there were any (when not, the document is
// returned unchanged).
func RemoveGuestChannel(domainXML, name string) (string, bool, error) {
	ed, err := NewEdit(domainXML)
	if err != nil {
		return "", false, err
	}
	removed, err := ed.RemoveGuestChannel(name)
	if err != nil {
		return "", false, err
	}
	x, err := ed.XML()
	return x, removed, err
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
	// One streaming pass (the agent reads this once per started domain):
	// the first <devices><channel> (any prefix, as findChannels) whose
	// first <target> is virtio named name, whose type is unix and whose
	// first <source> has a path.
	var (
		path                          string
		chType, tgtType, tgtName, src string
		haveTarget, haveSource        bool
	)
	attr := func(t *xml.StartElement, key string) string {
		for _, a := range t.Attr {
			if a.Name.Local == key {
				return a.Value
			}
		}
		return ""
	}
	err := checkDomainVisit(liveXML, func(open []xml.Name, t *xml.StartElement) {
		if path != "" || len(open) < 3 || open[1].Local != "devices" || open[2].Local != "channel" {
			return
		}
		switch {
		case len(open) == 3 && t != nil:
			chType, tgtType, tgtName, src = attr(t, "type"), "", "", ""
			haveTarget, haveSource = false, false
		case len(open) == 4 && t != nil && t.Name.Local == "target" && !haveTarget:
			haveTarget, tgtType, tgtName = true, attr(t, "type"), attr(t, "name")
		case len(open) == 4 && t != nil && t.Name.Local == "source" && !haveSource:
			haveSource, src = true, attr(t, "path")
		case len(open) == 3 && t == nil:
			if tgtType == "virtio" && tgtName == name && chType == "unix" && src != "" {
				path = src
			}
		}
	})
	if err != nil {
		return "", false, err
	}
	return path, path != "", nil
}
