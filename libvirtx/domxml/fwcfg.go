package domxml

import (
	"fmt"
	"slices"
	"strings"

	"github.com/beevik/etree"
)

// QEMU's firmware configuration device (fw_cfg) carries named blobs the
// guest reads at /sys/firmware/qemu_fw_cfg/by_name/NAME/raw. libvirt (6.5
// and later) passes them from the domain's
//
//	<sysinfo type='fwcfg'>
//	  <entry name='opt/com.coreos/config' file='/var/run/payload/….ign'/>
//	</sysinfo>
//
// (an entry's value may also be its text instead of a file). QEMU reads
// each file once, when it starts, and fails to start when one is missing;
// sysinfo is not a device, so nothing changes it on a running domain: a
// changed definition is seen at the next cold start.

// IgnitionFwCfgNames are the fw_cfg names Ignition's qemu platform reads
// its config from: Fedora CoreOS's and RHCOS's (also read by newer
// Flatcar), then Flatcar's older name.
var IgnitionFwCfgNames = []string{"opt/com.coreos/config", "opt/org.flatcar-linux/config"}

// FwCfgEntry is one <entry> of a <sysinfo type='fwcfg'>.
type FwCfgEntry struct {
	// Name is the fw_cfg name (libvirt requires "opt/…").
	Name string
	// File is the host file QEMU reads the value from; "" when the value
	// is the entry's text.
	File string
}

// fwcfgSysinfos returns the root's <sysinfo type='fwcfg'> elements.
func fwcfgSysinfos(root *etree.Element) []*etree.Element {
	var out []*etree.Element
	for _, s := range root.SelectElements("sysinfo") {
		if s.SelectAttrValue("type", "") == "fwcfg" {
			out = append(out, s)
		}
	}
	return out
}

// fwcfgEntries returns the <entry> elements of every fwcfg sysinfo with
// their values, in document order.
func fwcfgEntries(root *etree.Element) ([]*etree.Element, []FwCfgEntry) {
	var els []*etree.Element
	var ents []FwCfgEntry
	for _, s := range fwcfgSysinfos(root) {
		for _, e := range s.SelectElements("entry") {
			els = append(els, e)
			ents = append(ents, FwCfgEntry{Name: e.SelectAttrValue("name", ""), File: e.SelectAttrValue("file", "")})
		}
	}
	return els, ents
}

// FwCfgEntries returns the fw_cfg entries of a domain definition.
func FwCfgEntries(domainXML string) ([]FwCfgEntry, error) {
	d, err := Read(domainXML)
	if err != nil {
		return nil, err
	}
	return d.FwCfgEntries(), nil
}

// FwCfgEntries returns the fw_cfg entries of the document as it is now.
func (e *Document) FwCfgEntries() []FwCfgEntry {
	_, ents := fwcfgEntries(e.root)
	return ents
}

// SetFwCfgFile makes each of names an fw_cfg entry whose value is the file
// at path: an entry of that name already there (in any fwcfg sysinfo, with
// a file or a text value) is replaced, every other entry and every other
// sysinfo is kept. A domain without a fwcfg sysinfo gets one, before <os>
// (where libvirt writes it). When the entries are there already, exactly
// once each and naming path, the document is left as it was. It returns
// the files the replaced entries named (other than path), for the caller
// to judge.
func (e *Edit) SetFwCfgFile(path string, names ...string) ([]string, error) {
	if err := checkImagePath(path); err != nil {
		return nil, fmt.Errorf("setting fw_cfg entries: %w", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("setting fw_cfg entries: no entry name")
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "opt/") {
			return nil, fmt.Errorf("setting fw_cfg entries: name %q does not start with \"opt/\" (libvirt refuses it)", n)
		}
	}
	els, ents := fwcfgEntries(e.root)
	seen := map[string]int{}
	same := true
	for i, en := range ents {
		if !slices.Contains(names, en.Name) {
			continue
		}
		seen[en.Name]++
		if en.File != path || strings.TrimSpace(els[i].Text()) != "" {
			same = false
		}
	}
	for _, n := range names {
		if seen[n] != 1 {
			same = false
		}
	}
	if same {
		return nil, nil
	}
	var replaced []string
	var sys *etree.Element
	for i, en := range ents {
		if !slices.Contains(names, en.Name) {
			continue
		}
		if en.File != "" && en.File != path && !slices.Contains(replaced, en.File) {
			replaced = append(replaced, en.File)
		}
		parent := els[i].Parent()
		if sys == nil {
			sys = parent // new entries go where the first one was
		}
		removeWithIndent(parent, els[i])
	}
	if sys == nil {
		if s := fwcfgSysinfos(e.root); len(s) > 0 {
			sys = s[0]
		} else {
			sys = etree.NewElement("sysinfo")
			sys.CreateAttr("type", "fwcfg")
			insertSysinfo(e.root, sys)
		}
	}
	for _, n := range names {
		en := etree.NewElement("entry")
		en.CreateAttr("name", n)
		en.CreateAttr("file", path)
		indentChild(sys, en)
	}
	e.changed = true
	return replaced, nil
}

// RemoveFwCfgEntries removes the fw_cfg entries match selects, and a fwcfg
// sysinfo left empty, and returns the removed entries.
func (e *Edit) RemoveFwCfgEntries(match func(FwCfgEntry) bool) []FwCfgEntry {
	els, ents := fwcfgEntries(e.root)
	var removed []FwCfgEntry
	for i, en := range ents {
		if !match(en) {
			continue
		}
		parent := els[i].Parent()
		removeWithIndent(parent, els[i])
		if onlySpace(parent) {
			removeWithIndent(parent.Parent(), parent)
		}
		removed = append(removed, en)
	}
	if len(removed) > 0 {
		e.changed = true
	}
	return removed
}

// IsIgnitionFwCfg reports whether name is one of IgnitionFwCfgNames.
func IsIgnitionFwCfg(name string) bool { return slices.Contains(IgnitionFwCfgNames, name) }

// insertSysinfo puts a new <sysinfo> where libvirt writes it: after the
// last <sysinfo> there is, else before <os> (or <bootloader>), else last.
func insertSysinfo(root, sys *etree.Element) {
	var before *etree.Element
	if s := root.SelectElements("sysinfo"); len(s) > 0 {
		last := s[len(s)-1]
		if i := last.Index() + 1; i < len(root.Child) {
			for _, t := range root.Child[i:] {
				if el, ok := t.(*etree.Element); ok {
					before = el
					break
				}
			}
		}
	} else {
		for _, tag := range []string{"bootloader", "os"} {
			if el := root.SelectElement(tag); el != nil && (before == nil || el.Index() < before.Index()) {
				before = el
			}
		}
	}
	if before == nil {
		indentChild(root, sys)
		return
	}
	at := before.Index()
	if at > 0 {
		if cd, ok := root.Child[at-1].(*etree.CharData); ok && cd.IsWhitespace() {
			// an indented document: the new element gets a line of its own
			root.InsertChildAt(at, newText(cd.Data))
		}
	}
	root.InsertChildAt(at, sys)
}

// onlySpace reports whether el has no child but whitespace text.
func onlySpace(el *etree.Element) bool {
	for _, t := range el.Child {
		if cd, ok := t.(*etree.CharData); !ok || strings.TrimSpace(cd.Data) != "" {
			return false
		}
	}
	return true
}

// FwCfgSysinfoXML renders a <sysinfo type='fwcfg'> element whose entries
// names all name the file at path, for a definition edited by hand
// (sysinfo is not a device: virsh attach-device cannot add it).
func FwCfgSysinfoXML(path string, names ...string) (string, error) {
	ed, err := NewEdit("<domain><os/></domain>")
	if err != nil {
		return "", err
	}
	if _, err := ed.SetFwCfgFile(path, names...); err != nil {
		return "", err
	}
	doc := etree.NewDocument()
	doc.SetRoot(fwcfgSysinfos(ed.root)[0].Copy())
	return serialize(doc)
}
