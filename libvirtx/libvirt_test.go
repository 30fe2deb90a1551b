package libvirtx

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"libvirt.org/go/libvirt"
)

// testDomainXML is a minimal domain for the test driver.
func testDomainXML(name, uuid string) string {
	u := ""
	if uuid != "" {
		u = "<uuid>" + uuid + "</uuid>"
	}
	return "<domain type='test'><name>" + name + "</name>" + u +
		"<memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os></domain>"
}

func nodeURI(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("testdata", "node.xml"))
	if err != nil {
		t.Fatal(err)
	}
	return "test://" + abs
}

// TestLibvirtErrorContract checks, through the binding directly, the error
// codes that IsNotFound and IsUnsupported rely on.
func TestLibvirtErrorContract(t *testing.T) {
	c, err := libvirt.NewConnect(nodeURI(t))
	if err != nil {
		t.Fatalf("NewConnect: %v", err)
	}
	defer c.Close()
	d, err := c.LookupDomainByName("vmpx-node-running")
	if err != nil {
		t.Fatalf("LookupDomainByName: %v", err)
	}
	defer d.Free()
	tests := []struct {
		name             string
		call             func() error
		notFound, unsupp bool
	}{
		{"missing name", func() error { _, err := c.LookupDomainByName("vmpx-none"); return err }, true, false},
		{"missing uuid", func() error {
			_, err := c.LookupDomainByUUIDString("00000000-0000-0000-0000-00000000dead")
			return err
		}, true, false},
		{"bad xml", func() error { _, err := c.DomainDefineXML("<domain"); return err }, false, false},
		{"update", func() error { return d.UpdateDeviceFlags("<disk/>", DOMAIN_DEVICE_MODIFY_LIVE) }, false, true},
		{"attach", func() error { return d.AttachDeviceFlags("<disk/>", DOMAIN_DEVICE_MODIFY_CONFIG) }, false, true},
		{"detach", func() error { return d.DetachDeviceFlags("<disk/>", DOMAIN_DEVICE_MODIFY_CONFIG) }, false, true},
		{"start running", d.Create, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var le libvirt.Error
			if !errors.As(err, &le) || le.Message == "" {
				t.Fatalf("error %v (%T) is not a libvirt.Error with a message", err, err)
			}
			if IsNotFound(err) != tt.notFound || IsUnsupported(err) != tt.unsupp || IsDisconnected(err) || IsTrayBusy(err) {
				t.Errorf("%v: notFound=%v unsupported=%v disconnected=%v trayBusy=%v", err,
					IsNotFound(err), IsUnsupported(err), IsDisconnected(err), IsTrayBusy(err))
			}
		})
	}
}

func TestCloseReasonName(t *testing.T) {
	for r, want := range map[libvirt.ConnectCloseReason]string{
		libvirt.CONNECT_CLOSE_REASON_ERROR:     "error",
		libvirt.CONNECT_CLOSE_REASON_EOF:       "eof",
		libvirt.CONNECT_CLOSE_REASON_KEEPALIVE: "keepalive",
		libvirt.CONNECT_CLOSE_REASON_CLIENT:    "client",
		99:                                     "unknown",
	} {
		if got := closeReasonName(r); got != want {
			t.Errorf("closeReasonName(%d) = %q, want %q", r, got, want)
		}
	}
}

// TestLibvirtLoadable: the tests run where libvirt is installed, so the
// probe must succeed (with libvirt_dlopen it really opens libvirt.so.0).
func TestLibvirtLoadable(t *testing.T) {
	if err := libvirtLoadable(); err != nil {
		t.Fatalf("libvirtLoadable: %v", err)
	}
}

func TestConnectErrorIsLibvirtError(t *testing.T) {
	_, err := libvirt.NewConnect("test:///nonexistent/vmpx-node.xml")
	var le libvirt.Error
	if !errors.As(err, &le) || le.Code == libvirt.ERR_OK || !strings.Contains(err.Error(), le.Message) {
		t.Fatalf("NewConnect on a missing node file: err = %#v", err)
	}
}
