// The engine's deliveries (package agent/delivery): the environment it
// lends them, and the removal of payload files a definition no longer
// names, which waits for a running domain's QEMU to stop when it was
// started with them.

package engine

import (
	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/delivery/registry"
	"github.com/vmpayload/vmpayload/libvirtx"
)

// env is what the engine lends its deliveries.
func (e *Engine) env() *delivery.Env {
	env := &delivery.Env{
		Host: e.Host, PayloadDir: e.PayloadDir, Bus: e.Bus, Opts: e.domOpts(),
		Log: e.log(), Metrics: e.Metrics, TrayWait: e.TrayWait, ResetWindow: e.ResetWindow,
		Start: e.start,
	}
	if e.Starts != nil {
		env.Starts = e.Starts
	}
	return env
}

// deliveries are the engine's deliveries (package registry).
func (e *Engine) deliveries() *registry.Set { return registry.New(e.env()) }

// supersede removes a payload file the persistent definition of dom no
// longer names, or, when the running domain's QEMU was started with it (the
// live definition names it, or cannot be read), defers that until the
// domain stops: QEMU holds no fw_cfg file open, but libvirt gives the
// files of a stopping domain their owner back and, when one of them is
// gone, skips the others it would have given back after it.
// It reports whether the file was removed (or tried: see removeImage).
func (e *Engine) supersede(dom libvirtx.DomainInfo, live *delivery.Live, path, reason string) bool {
	if !e.Owns(path) {
		return false
	}
	if dom.Active && live.Has(path) {
		e.Cleanups.deferUntilStop(dom.UUID, path, reason)
		e.log().Info("payload file kept until the domain stops: its QEMU was started with it", "path", path, "domain", dom.Name, "reason", reason)
		return false
	}
	e.removeImage(path, reason)
	return true
}
