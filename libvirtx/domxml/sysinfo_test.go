package domxml

import (
	"reflect"
	"strings"
	"testing"
)

var testCreds = []Credential{
	{Name: "firstboot.timezone", Value: []byte("Europe/Berlin")},
	{Name: "login.motd", Value: []byte("Welcome <&> home\n")},
	{Name: "system.hostname", Value: []byte("web1")},
	{Name: "tmpfiles.extra", Value: []byte("f /root/x 0644 root root - v\n")},
}

func credNames(cs []Credential) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestOEMCredential(t *testing.T) {
	for _, c := range []struct {
		name  string
		value string
		want  string
	}{
		{"system.hostname", "web1", "io.systemd.credential:system.hostname=web1"},
		{"a.b", "x=y z", "io.systemd.credential:a.b=x=y z"},
		{"login.motd", "hi\n", "io.systemd.credential.binary:login.motd=aGkK"},
		{"bin", "\x00\xff", "io.systemd.credential.binary:bin=AP8="},
		{"lead", " x", "io.systemd.credential.binary:lead=IHg="},
		{"empty", "", "io.systemd.credential:empty="},
	} {
		got := OEMCredential(c.name, []byte(c.value))
		if got != c.want {
			t.Errorf("OEMCredential(%q, %q) = %q, want %q", c.name, c.value, got, c.want)
		}
		if n, ok := OEMCredentialName(got); !ok || n != c.name {
			t.Errorf("OEMCredentialName(%q) = %q, %v", got, n, ok)
		}
	}
	if _, ok := OEMCredentialName("myapp:role=web"); ok {
		t.Error("a foreign OEM string is read as a credential")
	}
}

// TestSetSMBIOSCredentials: the credentials go into the smbios sysinfo's
// OEM strings (a new one before <os> where there is none) with
// <smbios mode='sysinfo'/>, keeping the user's sysinfo and OEM strings;
// setting them again with new values replaces exactly vmpayload's entries;
// removing them gives the original document back.
func TestSetSMBIOSCredentials(t *testing.T) {
	for _, c := range []struct{ input, golden string }{
		{"pc.xml", "pc-smbios-creds.xml"},
		{"sysinfo.xml", "sysinfo-smbios-creds.xml"},
		{"sysinfo-oem.xml", "sysinfo-oem-smbios-creds.xml"},
	} {
		t.Run(c.input, func(t *testing.T) {
			in, out := setGolden(t, c.input, c.golden, func(x string) (string, error) { return SetSMBIOSCredentials(x, testCreds, nil) })
			// a second job: one credential fewer, one value changed
			next := []Credential{{Name: "system.hostname", Value: []byte("web2")}, testCreds[0]}
			out2, err := SetSMBIOSCredentials(out, next, credNames(testCreds))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range oemOf(t, out2) {
				if n, ok := OEMCredentialName(e); ok && n != "user.own" {
					got = append(got, e)
				}
			}
			want := []string{"io.systemd.credential:system.hostname=web2", "io.systemd.credential:firstboot.timezone=Europe/Berlin"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("after the second job: %q, want %q", got, want)
			}
			back, removed, err := RemoveSMBIOSCredentials(out2, []string{"system.hostname", "firstboot.timezone"})
			if err != nil {
				t.Fatal(err)
			}
			if len(removed) != 2 {
				t.Errorf("removed %v", removed)
			}
			wantOriginal(t, back, in)
		})
	}
}

// setGolden sets credentials with set on the input document name and
// compares the result with the golden file goldenName; it returns both.
func setGolden(t *testing.T, name, goldenName string, set func(string) (string, error)) (in, out string) {
	t.Helper()
	in = readInput(t, name)
	out, err := set(in)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, goldenName, out)
	return in, out
}

// wantOriginal fails t unless back, what removing every edit gave, is the
// document in (with the quotes libvirt writes).
func wantOriginal(t *testing.T, back, in string) {
	t.Helper()
	if back != normalize(t, in) {
		t.Errorf("removing gives\n%s\nwant the original\n%s", back, in)
	}
}

func oemOf(t *testing.T, x string) []string {
	t.Helper()
	_, root, err := parse(x)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range oemEntries(root) {
		out = append(out, e.Text())
	}
	return out
}

func TestSetSMBIOSCredentialsRefuses(t *testing.T) {
	pc := readInput(t, "pc.xml")
	big := make([]byte, MaxOEMStringBytes)
	for i := range big {
		big[i] = 'x'
	}
	many := make([]Credential, MaxOEMStrings+1)
	for i := range many {
		many[i] = Credential{Name: "n" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26), Value: []byte("v")}
	}
	for _, c := range []struct {
		name, xml string
		creds     []Credential
		owned     []string
		msg       string
	}{
		{"the user's own credential", readInput(t, "sysinfo-oem.xml"), []Credential{{Name: "user.own", Value: []byte("x")}}, nil, "of its own"},
		{"smbios mode host", strings.Replace(pc, "<boot dev='hd'/>", "<boot dev='hd'/><smbios mode='host'/>", 1), testCreds, nil, `mode="host"`},
		{"too large", pc, []Credential{{Name: "big", Value: big}}, nil, "more than the 60000"},
		{"too many", pc, many, nil, "at most 255"},
		{"twice", pc, []Credential{testCreds[0], testCreds[0]}, nil, "twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := SetSMBIOSCredentials(c.xml, c.creds, c.owned)
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %v, want one containing %q", err, c.msg)
			}
		})
	}
	// the user's credential of another name is kept; owned names replace
	out, err := SetSMBIOSCredentials(readInput(t, "sysinfo-oem.xml"), []Credential{{Name: "user.own", Value: []byte("new")}}, []string{"user.own"})
	if err != nil {
		t.Fatal(err)
	}
	if got := oemOf(t, out); !reflect.DeepEqual(got, []string{"myapp:role=web", "io.systemd.credential:user.own=new"}) {
		t.Errorf("OEM strings %q", got)
	}
}

// TestSetFwCfgCredentials: one fw_cfg entry per credential file, the
// user's own entries kept; owned entries a later job drops are removed;
// removing all gives the original back.
func TestSetFwCfgCredentials(t *testing.T) {
	files := []CredentialFile{
		{Name: "passwd.hashed-password.root", File: "/var/lib/vmpayload/payload/creds-vm/passwd.hashed-password.root"},
		{Name: "ssh.authorized_keys.root", File: "/var/lib/vmpayload/payload/creds-vm/ssh.authorized_keys.root"},
	}
	for _, c := range []struct{ input, golden string }{
		{"pc.xml", "pc-fwcfg-creds.xml"},
		{"sysinfo.xml", "sysinfo-fwcfg-creds.xml"},
	} {
		t.Run(c.input, func(t *testing.T) {
			in, out := setGolden(t, c.input, c.golden, func(x string) (string, error) { return SetFwCfgCredentials(x, files, nil) })
			out2, err := SetFwCfgCredentials(out, files[1:], []string{files[0].Name, files[1].Name})
			if err != nil {
				t.Fatal(err)
			}
			ents, _ := FwCfgEntries(out2)
			for _, e := range ents {
				if e.Name == CredentialFwCfgName(files[0].Name) {
					t.Errorf("entry %v of a dropped credential kept", e)
				}
			}
			back, removed, err := RemoveFwCfgCredentials(out2, []string{files[0].Name, files[1].Name})
			if err != nil {
				t.Fatal(err)
			}
			if len(removed) != 1 || removed[0].File != files[1].File {
				t.Errorf("removed %v", removed)
			}
			wantOriginal(t, back, in)
		})
	}
	pc := readInput(t, "pc.xml")
	if _, err := SetFwCfgCredentials(pc, []CredentialFile{{Name: "this.name.is.much.too.long.for", File: "/x"}}, nil); err == nil || !strings.Contains(err.Error(), "at most 55") {
		t.Errorf("a 57-character fw_cfg name: %v", err)
	}
	own, err := SetFwCfgCredentials(pc, files[:1], nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SetFwCfgCredentials(own, files[:1], nil); err == nil || !strings.Contains(err.Error(), "of its own") {
		t.Errorf("over the user's own entry: %v", err)
	}
}

// TestCredentialsEditSession: the credential edits are edits of one
// Document: SMBIOS strings, fw_cfg entries and their removal share one
// parse, give the string functions' result, and a refused edit leaves the
// document as it was.
func TestCredentialsEditSession(t *testing.T) {
	in := readInput(t, "sysinfo-oem.xml")
	files := []CredentialFile{{Name: "passwd.hashed-password.root", File: "/var/lib/vmpayload/payloads/x/cred-1"}}
	before := Parses()
	ed, err := NewEdit(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := ed.SetSMBIOSCredentials(testCreds, nil); err != nil {
		t.Fatal(err)
	}
	if err := ed.SetFwCfgCredentials(files, nil); err != nil {
		t.Fatal(err)
	}
	mid, err := ed.XML()
	if err != nil {
		t.Fatal(err)
	}
	// refused: a credential over the room, and one the user passes
	big := []Credential{{Name: "big", Value: []byte(strings.Repeat("x", MaxOEMStringBytes))}}
	if err := ed.SetSMBIOSCredentials(big, credNames(testCreds)); err == nil {
		t.Fatal("an OEM string over the room was set")
	}
	if err := ed.SetSMBIOSCredentials([]Credential{{Name: "user.own", Value: []byte("x")}}, credNames(testCreds)); err == nil {
		t.Fatal("the user's own credential was replaced")
	}
	if x, _ := ed.XML(); x != mid {
		t.Errorf("a refused edit changed the document:\n%s\nwant\n%s", x, mid)
	}
	if removed := ed.RemoveSMBIOSCredentials(credNames(testCreds)); len(removed) != len(testCreds) {
		t.Errorf("removed %v", removed)
	}
	if removed := ed.RemoveFwCfgCredentials([]string{files[0].Name}); len(removed) != 1 {
		t.Errorf("removed fw_cfg entries %v", removed)
	}
	back, err := ed.XML()
	if err != nil {
		t.Fatal(err)
	}
	if n := Parses() - before; n != 1 {
		t.Errorf("the session parsed %d documents, want 1", n)
	}
	// the same as the chain of string functions
	want, err := SetSMBIOSCredentials(in, testCreds, nil)
	if err == nil {
		want, err = SetFwCfgCredentials(want, files, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if mid != want {
		t.Errorf("the session gives\n%s\nthe string functions\n%s", mid, want)
	}
	wantOriginal(t, back, in)
}
