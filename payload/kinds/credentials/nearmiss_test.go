package credentials

import "testing"

func TestNearMiss(t *testing.T) {
	for name, want := range map[string]string{
		"firstboot.timezone": "", "my.own.thing": "", "network.network.50-x": "", "tmpfiles.extra": "",
		"tmpfile.extra": "tmpfiles.extra", "system.hostnme": "system.hostname", "login.mtod": "login.motd",
		"sysctl.extras": "sysctl.extra", "network.links.x": "network.link.*", "foo": "",
	} {
		if got := nearMiss(name); got != want {
			t.Errorf("nearMiss(%q) = %q, want %q", name, got, want)
		}
	}
}
