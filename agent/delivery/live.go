package delivery

import (
	"context"
	"slices"

	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// Live is what a running domain's live definition names: its files (drives
// and fw_cfg entries) and its fw_cfg entries. An unread one (Known false)
// is taken to name every file and no fw_cfg entry.
type Live struct {
	Known bool
	Files []string
	FwCfg []domxml.FwCfgEntry
}

// ReadLive reads the live definition of the running domain dom.
func (e *Env) ReadLive(ctx context.Context, dom libvirtx.DomainInfo) *Live {
	x, err := e.Host.LiveXML(ctx, dom.UUID)
	if err != nil {
		e.Logger().Warn("reading the live definition failed; payload files it may name are kept until the domain stops", "domain", dom.Name, "err", err)
		return &Live{}
	}
	doc, err := domxml.Read(x)
	if err != nil {
		return &Live{}
	}
	return &Live{Known: true, Files: doc.ReferencedFiles(), FwCfg: doc.FwCfgEntries()}
}

// Has reports whether the live definition names path (an unread one, or
// none read: maybe).
func (l *Live) Has(path string) bool { return l == nil || !l.Known || slices.Contains(l.Files, path) }
