package owner

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestClaimAndMayRemove: a claim is recorded next to the image, a second
// host's claim replaces it, and only the recorded owner (or anyone, for an
// image without a marker, or a host without an id) may remove the image;
// Forget drops the marker and Stale finds a host's markers whose image is
// gone.
func TestClaimAndMayRemove(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "u-1.iso")
	if err := os.WriteFile(img, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	check := func(host string, wantOK bool, wantOwner string) {
		t.Helper()
		ok, by, err := MayRemove(img, host)
		if err != nil || ok != wantOK || by != wantOwner {
			t.Errorf("MayRemove(%q) = %v, %q, %v; want %v, %q", host, ok, by, err, wantOK, wantOwner)
		}
	}
	check("a", true, "") // no marker: as before markers existed
	if err := Claim(img, "a"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, Dir, "u-1.iso")); err != nil || string(b) != "a\n" {
		t.Fatalf("marker %q, %v", b, err)
	}
	check("a", true, "a")
	check("b", false, "a")
	check("", true, "") // no identity: no protection
	if err := Claim(img, "b"); err != nil {
		t.Fatal(err)
	}
	check("a", false, "b")
	check("b", true, "b")
	if err := Claim(img, ""); err != nil {
		t.Fatal(err)
	}
	if by, _ := Of(img); by != "b" {
		t.Errorf("an empty host replaced the owner: %q", by)
	}
	if s, err := Stale(dir, "b"); err != nil || len(s) != 0 {
		t.Errorf("Stale with the image present = %v, %v", s, err)
	}
	if err := os.Remove(img); err != nil {
		t.Fatal(err)
	}
	if s, err := Stale(dir, "a"); err != nil || len(s) != 0 {
		t.Errorf("Stale for another host = %v, %v", s, err)
	}
	s, err := Stale(dir, "b")
	if err != nil || !reflect.DeepEqual(s, []string{img}) {
		t.Fatalf("Stale = %v, %v; want [%s]", s, err, img)
	}
	if err := Forget(img); err != nil {
		t.Fatal(err)
	}
	if err := Forget(img); err != nil {
		t.Errorf("Forget of a missing marker: %v", err)
	}
	if by, err := Of(img); by != "" || err != nil {
		t.Errorf("Of after Forget = %q, %v", by, err)
	}
}

// TestHostID: the machine id when there is one, else the host name.
func TestHostID(t *testing.T) {
	old := MachineIDFile
	t.Cleanup(func() { MachineIDFile = old })
	f := filepath.Join(t.TempDir(), "machine-id")
	if err := os.WriteFile(f, []byte("0123456789abcdef0123456789abcdef\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	MachineIDFile = f
	if got := HostID(); got != "0123456789abcdef0123456789abcdef" {
		t.Errorf("HostID = %q", got)
	}
	for _, content := range []string{"", "\n", "two\nlines\n"} {
		if err := os.WriteFile(f, []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
		h, _ := os.Hostname()
		if got := HostID(); got != h {
			t.Errorf("machine id %q: HostID = %q, want the host name %q", content, got, h)
		}
	}
	MachineIDFile = filepath.Join(t.TempDir(), "missing")
	if h, _ := os.Hostname(); HostID() != h {
		t.Errorf("no machine id: HostID = %q, want %q", HostID(), h)
	}
}
