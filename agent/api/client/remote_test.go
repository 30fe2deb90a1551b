package client

import (
	"strings"
	"testing"
	"time"
)

func TestParseURI(t *testing.T) {
	for _, c := range []struct {
		uri  string
		want Target // URI filled in by the test
		err  string // part of the error; "" for none
	}{
		{uri: "unix:///run/vmpayload/agent.sock", want: Target{Scheme: "unix", Socket: "/run/vmpayload/agent.sock"}},
		{uri: "ssh://kvm3", want: Target{Scheme: "ssh", Host: "kvm3"}},
		{uri: "ssh://ops@kvm3:2222/", want: Target{Scheme: "ssh", User: "ops", Host: "kvm3", Port: "2222"}},
		{uri: "ssh://[::1]:22", want: Target{Scheme: "ssh", Host: "::1", Port: "22"}},
		{uri: "ssh://kvm3?socket=/run/x.sock&command=/opt/bin/vmpayload", want: Target{Scheme: "ssh", Host: "kvm3", Socket: "/run/x.sock", Command: "/opt/bin/vmpayload"}},
		{uri: "http://kvm3", err: `unknown scheme "http"`},
		{uri: "kvm3", err: "no scheme"},
		{uri: "ssh://", err: "the host is missing"},
		{uri: "ssh://u@", err: "the host is missing"},
		{uri: "ssh://kvm3:0", err: `bad port "0"`},
		{uri: "ssh://kvm3:65536", err: `bad port "65536"`},
		{uri: "ssh://kvm3:", err: "the port is empty"},
		{uri: "ssh://kvm3:ab", err: "invalid port"},
		{uri: "ssh://-oProxyCommand=x", err: "bad host name"},
		{uri: "ssh://-u@kvm3", err: "bad user name"},
		{uri: "ssh://u:secret@kvm3", err: "a password in the URI is not allowed"},
		{uri: "ssh://kvm3/system", err: `unexpected path "/system"`},
		{uri: "ssh://kvm3?sock=/x", err: `unknown query key "sock"`},
		{uri: "ssh://kvm3?socket=rel", err: "not an absolute path"},
		{uri: "ssh://kvm3?socket=/a&socket=/b", err: "given 2 times"},
		{uri: "ssh://kvm3?command=", err: "command= is empty"},
		{uri: "ssh://kvm3#x", err: "fragment"},
		{uri: "unix://host/x", err: "names no host"},
		{uri: "unix:///a/../b", err: "not a clean absolute path"},
		{uri: "unix:///x?socket=/y", err: `unknown query key "socket"`},
	} {
		got, err := ParseURI(c.uri)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), `"`+c.uri+`"`) {
				t.Errorf("ParseURI(%q) error %v; want one quoting the URI and saying %q", c.uri, err, c.err)
			}
			continue
		}
		c.want.URI = c.uri
		if err != nil || got != c.want {
			t.Errorf("ParseURI(%q) = %+v, %v; want %+v", c.uri, got, err, c.want)
		}
	}
}

func TestSSHArgs(t *testing.T) {
	t.Setenv(SSHCommandEnv, "")
	tg, err := ParseURI("ssh://ops@kvm3:2222?socket=/run/my%20agent.sock&command=/opt/vmpayload")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(SSHArgs(tg, 7*time.Second), " ")
	want := "ssh -o BatchMode=yes -o ConnectTimeout=7 -p 2222 -l ops -- kvm3 /opt/vmpayload dial-stdio --socket '/run/my agent.sock'"
	if got != want {
		t.Errorf("SSHArgs = %s\nwant      %s", got, want)
	}
	t.Setenv(SSHCommandEnv, "ssh -F /tmp/cfg")
	tg, _ = ParseURI("ssh://kvm3")
	got = strings.Join(SSHArgs(tg, DefaultConnectTimeout), " ")
	want = "ssh -F /tmp/cfg -o BatchMode=yes -o ConnectTimeout=10 -- kvm3 vmpayload dial-stdio"
	if got != want {
		t.Errorf("SSHArgs = %s\nwant      %s", got, want)
	}
}
