// Package deliverytest holds the fake-host set-up that the tests of the
// delivery packages (drive, fwcfg, smbios) share.
package deliverytest

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/libvirtxtest"
)

// Dir is the payload directory of the Env that Setup returns.
const Dir = "/var/lib/vmpayload-test"

// Setup defines def on a new fake host (running when active) and returns
// the fake, an Env on it (payload directory Dir, a log that discards, a
// Start that starts the domain on the fake) and the domain.
func Setup(tb testing.TB, def string, active bool) (*libvirtxtest.Fake, *delivery.Env, libvirtx.DomainInfo) {
	tb.Helper()
	f := libvirtxtest.New()
	dom, err := f.DefineXML(context.Background(), def)
	if err != nil {
		tb.Fatal(err)
	}
	if active {
		f.SetActive(dom.UUID, true)
		dom.Active = true
	}
	env := &delivery.Env{Host: f, PayloadDir: Dir, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Start: func(ctx context.Context, dom libvirtx.DomainInfo, _ bool) error { return f.Start(ctx, dom.UUID) }}
	return f, env, dom
}
