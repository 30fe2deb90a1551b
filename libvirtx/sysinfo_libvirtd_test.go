package libvirtx

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestLibvirtdKeepsCredentials: the real libvirtd (VMPAYLOAD_LIBVIRTD=1)
// keeps the credentials domxml puts in a definition (SMBIOS OEM strings
// beside the user's own, an fw_cfg file entry), turns them into QEMU's
// -smbios type=11 and -fw_cfg arguments (a comma in a value doubled), and
// after RemoveSMBIOSCredentials / RemoveFwCfgCredentials the definition
// still makes a command line (no <smbios mode='sysinfo'/> left pointing
// at nothing) with the user's OEM string and no credential.
func TestLibvirtdKeepsCredentials(t *testing.T) {
	testenv.NeedLibvirtd(t)
	name := "creds-" + testenv.RandHex(t, 4)
	dir := testenv.WorkDir(t, name)
	keyFile := filepath.Join(dir, "ssh.authorized_keys.root")
	if err := os.WriteFile(keyFile, []byte("ssh-ed25519 AAAA test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := `<domain type='qemu'>
  <name>` + name + `</name>
  <memory unit='KiB'>131072</memory>
  <vcpu placement='static'>1</vcpu>
  <sysinfo type='smbios'>
    <oemStrings>
      <entry>myapp:role=web</entry>
    </oemStrings>
  </sysinfo>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
  </os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
  </devices>
</domain>
`
	creds := []domxml.Credential{
		{Name: "system.hostname", Value: []byte("web1")},
		{Name: "my.comma", Value: []byte("a,b & <c>")},
		{Name: "login.motd", Value: []byte("Welcome\n")},
	}
	owned := []string{"system.hostname", "my.comma", "login.motd"}
	ed, err := domxml.NewEdit(base)
	if err == nil {
		err = ed.SetSMBIOSCredentials(creds, nil)
	}
	if err == nil {
		err = ed.SetFwCfgCredentials([]domxml.CredentialFile{{Name: "ssh.authorized_keys.root", File: keyFile}}, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	virsh := func(input string, args ...string) string {
		t.Helper()
		cmd := exec.Command("virsh", append([]string{"-c", systemURI}, args...)...)
		if input != "" {
			f := filepath.Join(dir, "domain.xml")
			if err := os.WriteFile(f, []byte(input), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd.Args = append(cmd.Args, f)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("virsh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// define puts ed's document into libvirt and returns it and QEMU's
	// command line for the domain.
	define := func(ed *domxml.Edit) (string, string) {
		t.Helper()
		x, err := ed.XML()
		if err != nil {
			t.Fatal(err)
		}
		virsh(x, "define")
		return x, virsh("", "domxml-to-native", "qemu-argv", "--domain", name)
	}
	t.Cleanup(func() { _ = exec.Command("virsh", "-c", systemURI, "undefine", name).Run() })
	_, argv := define(ed)
	dumped := virsh("", "dumpxml", name)
	for _, want := range []string{
		"<entry>myapp:role=web</entry>",
		"<entry>io.systemd.credential:system.hostname=web1</entry>",
		"<entry>io.systemd.credential:my.comma=a,b &amp; &lt;c&gt;</entry>",
		"<entry>io.systemd.credential.binary:login.motd=V2VsY29tZQo=</entry>",
		"<smbios mode='sysinfo'/>",
		"<entry name='opt/io.systemd.credentials/ssh.authorized_keys.root' file='" + keyFile + "'/>",
	} {
		if !strings.Contains(dumped, want) {
			t.Errorf("libvirt's definition lacks %s:\n%s", want, dumped)
		}
	}
	for _, want := range []string{
		"type=11,value=myapp:role=web,value=io.systemd.credential:system.hostname=web1,value=io.systemd.credential:my.comma=a,,b & <c>,value=io.systemd.credential.binary:login.motd=V2VsY29tZQo=",
		"-fw_cfg name=opt/io.systemd.credentials/ssh.authorized_keys.root,file=" + keyFile,
	} {
		if !strings.Contains(argv, want) {
			t.Errorf("QEMU's command line lacks %s:\n%s", want, argv)
		}
	}
	ed, err = domxml.NewEdit(dumped)
	if err != nil {
		t.Fatal(err)
	}
	if removed := ed.RemoveSMBIOSCredentials(owned); len(removed) != 3 {
		t.Fatalf("removed %v", removed)
	}
	ed.RemoveFwCfgCredentials([]string{"ssh.authorized_keys.root"})
	back, argv := define(ed)
	if !strings.Contains(argv, "type=11,value=myapp:role=web") || strings.Contains(argv, "io.systemd") {
		t.Errorf("after removing the credentials QEMU's command line is\n%s", argv)
	}
	// the last OEM string gone, the smbios sysinfo and its mode go too
	ed, err = domxml.NewEdit(strings.Replace(back, "<entry>myapp:role=web</entry>", "<entry>io.systemd.credential:x.y=1</entry>", 1))
	if err != nil {
		t.Fatal(err)
	}
	ed.RemoveSMBIOSCredentials([]string{"x.y"})
	_, argv = define(ed)
	if strings.Contains(argv, "type=11") {
		t.Errorf("an OEM string is left:\n%s", argv)
	}
}
