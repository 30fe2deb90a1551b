package libvirtx

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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

func openTest(t *testing.T, uri string) *Connect {
	t.Helper()
	c, err := NewConnect(uri)
	if err != nil {
		t.Fatalf("NewConnect(%q): %v", uri, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestBindingDomainLifecycle(t *testing.T) {
	c := openTest(t, "test:///default")
	const uuid = "5c6f3a59-8f0a-4b1c-9d2e-111122223333"
	d, err := c.DomainDefineXML(testDomainXML("vmpx-bind", uuid))
	if err != nil {
		t.Fatalf("DomainDefineXML: %v", err)
	}
	defer d.Free()
	steps := []struct {
		name       string
		do         func() error
		wantActive bool
	}{
		{"defined", func() error { return nil }, false},
		{"create", d.Create, true},
		{"destroy", d.Destroy, false},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		active, err := d.IsActive()
		if err != nil || active != s.wantActive {
			t.Fatalf("after %s: IsActive = %v, %v; want %v", s.name, active, err, s.wantActive)
		}
	}
	if name, err := d.GetName(); err != nil || name != "vmpx-bind" {
		t.Errorf("GetName = %q, %v", name, err)
	}
	if got, err := d.GetUUIDString(); err != nil || got != uuid {
		t.Errorf("GetUUIDString = %q, %v", got, err)
	}
	x, err := d.GetXMLDesc(DOMAIN_XML_INACTIVE)
	if err != nil || !strings.Contains(x, "<name>vmpx-bind</name>") {
		t.Errorf("GetXMLDesc = %q, %v", x, err)
	}
	byUUID, err := c.LookupDomainByUUIDString(uuid)
	if err != nil {
		t.Fatalf("LookupDomainByUUIDString: %v", err)
	}
	if n, _ := byUUID.GetName(); n != "vmpx-bind" {
		t.Errorf("lookup by UUID found %q", n)
	}
	byUUID.Free()
	if err := d.Undefine(); err != nil {
		t.Fatalf("Undefine: %v", err)
	}
	if _, err := c.LookupDomainByName("vmpx-bind"); !IsNotFound(err) {
		t.Errorf("lookup after undefine: err = %v, want not found", err)
	}
}

func TestBindingErrors(t *testing.T) {
	c := openTest(t, nodeURI(t))
	d, err := c.LookupDomainByName("vmpx-node-running")
	if err != nil {
		t.Fatalf("LookupDomainByName: %v", err)
	}
	defer d.Free()
	tests := []struct {
		name     string
		call     func() error
		wantCode ErrorNumber
	}{
		{"missing name", func() error { _, err := c.LookupDomainByName("vmpx-none"); return err }, ERR_NO_DOMAIN},
		{"missing uuid", func() error {
			_, err := c.LookupDomainByUUIDString("00000000-0000-0000-0000-00000000dead")
			return err
		}, ERR_NO_DOMAIN},
		{"bad xml", func() error { _, err := c.DomainDefineXML("<domain"); return err }, ERR_XML_DETAIL},
		{"update unsupported", func() error { return d.UpdateDeviceFlags("<disk/>", DOMAIN_DEVICE_MODIFY_LIVE) }, ERR_NO_SUPPORT},
		{"attach unsupported", func() error { return d.AttachDeviceFlags("<disk/>", DOMAIN_DEVICE_MODIFY_CONFIG) }, ERR_NO_SUPPORT},
		{"detach unsupported", func() error { return d.DetachDeviceFlags("<disk/>", DOMAIN_DEVICE_MODIFY_CONFIG) }, ERR_NO_SUPPORT},
		{"start running", d.Create, ERR_INTERNAL_ERROR}, // the test driver says "already running" this way
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var le Error
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T) is not a libvirtx.Error", err, err)
			}
			if le.Code != tt.wantCode || le.Message == "" || le.Level != ERR_ERROR {
				t.Errorf("error = %#v, want code %d with a message", le, tt.wantCode)
			}
			if !strings.Contains(le.Error(), le.Message) {
				t.Errorf("Error() %q lacks the message", le.Error())
			}
		})
	}
}

func TestBindingNodeFile(t *testing.T) {
	c := openTest(t, nodeURI(t))
	tests := []struct {
		flags ConnectListAllDomainsFlags
		want  []string
	}{
		{0, []string{"vmpx-node-running", "vmpx-node-second"}},
		{CONNECT_LIST_DOMAINS_SHUTOFF, nil},
	}
	for _, tt := range tests {
		doms, err := c.ListAllDomains(tt.flags)
		if err != nil {
			t.Fatalf("ListAllDomains(%d): %v", tt.flags, err)
		}
		var names []string
		for i := range doms {
			n, err := doms[i].GetName()
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
			doms[i].Free()
		}
		slices.Sort(names) // libvirt's order is a hash table's
		if strings.Join(names, ",") != strings.Join(tt.want, ",") {
			t.Errorf("ListAllDomains(%d) = %q, want %q", tt.flags, names, tt.want)
		}
	}
	if uri, err := c.GetURI(); err != nil || !strings.HasSuffix(uri, "node.xml") {
		t.Errorf("GetURI = %q, %v", uri, err)
	}
	if alive, err := c.IsAlive(); err != nil || !alive {
		t.Errorf("IsAlive = %v, %v", alive, err)
	}
}

func TestBindingEvents(t *testing.T) {
	if err := startEventLoop(); err != nil {
		t.Fatal(err)
	}
	c := openTest(t, "test:///default")
	got := make(chan DomainEventType, 16)
	id, err := c.DomainEventLifecycleRegister(nil, func(_ *Connect, d *Domain, ev *DomainEventLifecycle) {
		if n, _ := d.GetName(); n == "vmpx-bind-ev" {
			got <- ev.Event
		}
	})
	if err != nil {
		t.Fatalf("DomainEventLifecycleRegister: %v", err)
	}
	if err := c.RegisterCloseCallback(func(*Connect, ConnectCloseReason) {}); err != nil {
		t.Fatalf("RegisterCloseCallback: %v", err)
	}
	d, err := c.DomainDefineXML(testDomainXML("vmpx-bind-ev", ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Create(); err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := d.Undefine(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []DomainEventType{DOMAIN_EVENT_DEFINED, DOMAIN_EVENT_STARTED, DOMAIN_EVENT_STOPPED, DOMAIN_EVENT_UNDEFINED} {
		if ev := <-got; ev != want {
			t.Fatalf("event %v, want %v", ev, want)
		}
	}
	if err := c.DomainEventDeregister(id); err != nil {
		t.Errorf("DomainEventDeregister: %v", err)
	}
	if err := c.DomainEventDeregister(id); err == nil {
		t.Errorf("second DomainEventDeregister: want error")
	}
	if err := c.UnregisterCloseCallback(); err != nil {
		t.Errorf("UnregisterCloseCallback: %v", err)
	}
	// A domain handle holds a reference on its connection.
	if err := d.Free(); err != nil {
		t.Errorf("Free: %v", err)
	}
	if n, err := c.Close(); err != nil || n != 0 {
		t.Errorf("Close = %d, %v; want 0 references left", n, err)
	}
}

func TestBindingConnectError(t *testing.T) {
	_, err := NewConnect("test:///nonexistent/vmpx-node.xml")
	var le Error
	if !errors.As(err, &le) || le.Code == ERR_OK || le.Message == "" {
		t.Fatalf("NewConnect on a missing node file: err = %#v", err)
	}
}
