package domxml

import "fmt"

// The string forms of the Edit methods, for the tests: each reads the
// document, makes one edit and writes it back.

// DomainUUID returns the domain's <uuid>, or "" when the XML has none (libvirt
// then generates one at definition time).
func DomainUUID(domainXML string) (string, error) {
	d, err := Read(domainXML)
	if err != nil {
		return "", err
	}
	return d.UUID(), nil
}

// SetPayloadDrive puts the payload drive holding imagePath (a CD-ROM, or
// a read-only disk with AsDisk) into a domain definition and returns the new XML, the drive's device and whether an
// existing payload drive was replaced.
//
// An existing payload drive (alias PayloadAlias) keeps its position, bus,
// target, address and <boot> order; only its medium and flags are rewritten,
// and bus is ignored (remove the drive first to move it). Otherwise a new
// drive is added after the last <disk> on the bus ChooseDevice picks.
// Everything else in the document is left as it was.
func SetPayloadDrive(domainXML, imagePath string, bus Bus, opts ...Option) (string, Device, bool, error) {
	if err := checkImagePath(imagePath); err != nil {
		return "", Device{}, false, fmt.Errorf("setting payload CD-ROM: %w", err)
	}
	var dev Device
	var replaced bool
	out, err := edit(domainXML, "", func(ed *Edit) (err error) {
		dev, replaced, err = ed.SetPayloadDrive(imagePath, bus, opts...)
		return err
	})
	return out, dev, replaced, err
}

// SetMetadata puts elementXML (one element in namespace namespaceURI, e.g. a
// vmpayload recipe) into the domain's <metadata>, replacing every element
// of that namespace already there and creating <metadata> when the domain
// has none. libvirt keeps one element per namespace. Everything else in the
// document is left as it was.
func SetMetadata(domainXML, namespaceURI, elementXML string) (string, error) {
	return edit(domainXML, "", func(ed *Edit) error { return ed.SetMetadata(namespaceURI, elementXML) })
}

// SetSMBIOSCredentials returns domainXML with creds as SMBIOS OEM strings
// (Edit.SetSMBIOSCredentials: one Document, parsed once).
func SetSMBIOSCredentials(domainXML string, creds []Credential, owned []string) (string, error) {
	return edit(domainXML, "setting SMBIOS credentials", func(ed *Edit) error { return ed.SetSMBIOSCredentials(creds, owned) })
}

// RemoveSMBIOSCredentials returns domainXML without the OEM strings of the
// credentials named in owned, and the names it removed
// (Edit.RemoveSMBIOSCredentials); with nothing to remove the document is
// returned as it was.
func RemoveSMBIOSCredentials(domainXML string, owned []string) (string, []string, error) {
	var removed []string
	x, err := edit(domainXML, "removing SMBIOS credentials", func(ed *Edit) error { removed = ed.RemoveSMBIOSCredentials(owned); return nil })
	return x, removed, err
}

// SetFwCfgCredentials returns domainXML with one fw_cfg entry per
// credential in files (Edit.SetFwCfgCredentials: one Document, parsed
// once).
func SetFwCfgCredentials(domainXML string, files []CredentialFile, owned []string) (string, error) {
	return edit(domainXML, "setting fw_cfg credentials", func(ed *Edit) error { return ed.SetFwCfgCredentials(files, owned) })
}

// RemoveFwCfgCredentials returns domainXML without the fw_cfg entries of
// the credentials named in owned (Edit.RemoveFwCfgCredentials), with the
// entries it removed.
func RemoveFwCfgCredentials(domainXML string, owned []string) (string, []FwCfgEntry, error) {
	var removed []FwCfgEntry
	x, err := edit(domainXML, "removing fw_cfg credentials", func(ed *Edit) error { removed = ed.RemoveFwCfgCredentials(owned); return nil })
	return x, removed, err
}

// edit reads domainXML, makes the edit f and writes the document back; a
// document that does not read is an error about doing ("": as it is).
func edit(domainXML, doing string, f func(*Edit) error) (string, error) {
	ed, err := NewEdit(domainXML)
	if err != nil {
		if doing != "" {
			err = fmt.Errorf("%s: %w", doing, err)
		}
		return "", err
	}
	if err := f(ed); err != nil {
		return "", err
	}
	return ed.XML()
}
