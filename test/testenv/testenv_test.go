package testenv

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDomainXML(t *testing.T) {
	for _, c := range []struct {
		name string
		d    Domain
		want string
	}{
		{"test driver", Domain{Type: "test", Name: "a", MemoryMiB: 128, Machine: "q35"},
			"<domain type='test'><name>a</name><memory unit='MiB'>128</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='q35'>hvm</type></os><devices></devices></domain>"},
		{"qemu defaults", Domain{Name: "b"},
			"<domain type='qemu'><name>b</name><memory unit='MiB'>48</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os><on_poweroff>destroy</on_poweroff><devices><emulator>/usr/bin/qemu-system-x86_64</emulator><memballoon model='none'/></devices></domain>"},
		{"everything", Domain{Name: "c", UUID: "u", Arch: "ppc64", Machine: "pseries", Boot: "hd", ACPI: true, Metadata: "<m/>", Devices: "<d/>", Tail: "<seclabel type='none'/>"},
			"<domain type='qemu'><name>c</name><uuid>u</uuid><memory unit='MiB'>48</memory><vcpu>1</vcpu><os><type arch='ppc64' machine='pseries'>hvm</type><boot dev='hd'/></os><features><acpi/></features><metadata><m/></metadata><on_poweroff>destroy</on_poweroff><devices><emulator>/usr/bin/qemu-system-ppc64</emulator><d/><memballoon model='none'/></devices><seclabel type='none'/></domain>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.d.XML()
			if got != c.want {
				t.Errorf("XML():\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestTransientVirsh(t *testing.T) {
	away := []string{
		"error: failed to connect to the hypervisor\nerror: Failed to connect socket to '/run/libvirt/libvirt-sock': No such file or directory",
		"error: End of file while reading data: Input/output error",
	}
	failed := []string{"error: failed to get domain 'x'", "error: Hook script execution failed: internal error"}
	for i, msg := range append(away, failed...) {
		if got := TransientVirsh(msg); got != (i < len(away)) {
			t.Errorf("TransientVirsh(%q) = %v", msg, got)
		}
	}
}

func TestTempDirAndHashes(t *testing.T) {
	var dir string
	t.Run("dir", func(t *testing.T) {
		dir = TempDir(t, "", "testenv-", 0o711)
		st, err := os.Stat(dir)
		if ok, _ := filepath.Match("testenv-*", filepath.Base(dir)); err != nil || st.Mode().Perm() != 0o711 || !ok {
			t.Fatalf("TempDir: %v %v", st, err)
		}
		p := filepath.Join(dir, "f")
		WriteFiles(t, dir, map[string]string{"f": "abc"})
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("WriteFiles: %v %v", st, err)
		}
		const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
		if FileSHA256(t, p) != abc || SumOf(p) != abc || SHA256([]byte("abc")) != abc {
			t.Errorf("sha256 of abc: %s %s", FileSHA256(t, p), SumOf(p))
		}
		if s := SumOf(filepath.Join(dir, "missing")); s[0] != '(' {
			t.Errorf("SumOf of a missing file = %q", s)
		}
		if n, missing := DirNames(t, dir), DirNames(t, filepath.Join(dir, "missing")); !slices.Equal(n, []string{"f"}) || missing != nil {
			t.Errorf("DirNames: %q, of a missing directory %q", n, missing)
		}
		if EmptyDir(t, dir); DirNames(t, dir) != nil {
			t.Errorf("EmptyDir left %q", DirNames(t, dir))
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("TempDir %s left after its test: %v", dir, err)
	}
}

func TestGzip(t *testing.T) {
	r, err := gzip.NewReader(bytes.NewReader(Gzip(t, "#cloud-config\n")))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r); err != nil || string(b) != "#cloud-config\n" {
		t.Errorf("Gzip read back %q, %v", b, err)
	}
}

// stopTB records how MissingJudge stops a test.
type stopTB struct {
	testing.TB
	how, msg string
}

func (s *stopTB) Helper()                   {}
func (s *stopTB) Fatalf(f string, a ...any) { s.how, s.msg = "fail", fmt.Sprintf(f, a...) }
func (s *stopTB) Skipf(f string, a ...any)  { s.how, s.msg = "skip", fmt.Sprintf(f, a...) }

// TestMissingJudge: a missing judge skips the test, unless
// VMPAYLOAD_JUDGES=required (make test), where it fails it.
func TestMissingJudge(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"", "skip"}, {"0", "skip"}, {"required", "fail"},
	} {
		t.Setenv(JudgesEnv, tc.env)
		s := &stopTB{TB: t}
		MissingJudge(s, "no %s here", "judge")
		if s.how != tc.want || !strings.HasPrefix(s.msg, "no judge here") {
			t.Errorf("%s=%q: %s %q; want %s", JudgesEnv, tc.env, s.how, s.msg, tc.want)
		}
	}
}

// errTB records the errors Contains reports.
type errTB struct {
	testing.TB
	errs []string
}

func (e *errTB) Helper()                   {}
func (e *errTB) Errorf(f string, a ...any) { e.errs = append(e.errs, fmt.Sprintf(f, a...)) }

func TestContains(t *testing.T) {
	var e errTB
	Contains(&e, "the definition", "<a/><b/>", []string{"<a/>", "<c/>"}, []string{"<d/>", "<b/>"})
	want := []string{"the definition lacks <c/>:\n<a/><b/>", "the definition has <b/>:\n<a/><b/>"}
	if !slices.Equal(e.errs, want) {
		t.Errorf("Contains reported %q, want %q", e.errs, want)
	}
}

func TestNeedE2E(t *testing.T) {
	t.Setenv("VMPAYLOAD_E2E", "")
	s := &stopTB{TB: t}
	NeedE2E(s, "boot guests")
	if s.how != "skip" || !strings.HasPrefix(s.msg, "set VMPAYLOAD_E2E=1 to boot guests (") {
		t.Errorf("VMPAYLOAD_E2E unset: %s %q; want a skip", s.how, s.msg)
	}
	t.Setenv("VMPAYLOAD_E2E", "1")
	s = &stopTB{TB: t}
	NeedE2E(s, "boot guests")
	if want := map[bool]string{true: "", false: "skip"}[os.Geteuid() == 0]; s.how != want {
		t.Errorf("VMPAYLOAD_E2E=1, uid %d: %s %q; want %q", os.Geteuid(), s.how, s.msg, want)
	}
}
