package image

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// needTool fails the test (it does not skip) when a judge tool is missing:
// CI installs them via the Makefile, so absence is a setup bug to surface.
func needTool(tb testing.TB, name, pkg string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("required tool %q not found on PATH (install Debian package %q): %v", name, pkg, err)
	}
	return p
}

func run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func cidataEntries() []Entry {
	return []Entry{
		{Path: "meta-data", Data: []byte("instance-id: iid-0123456789abcdef\nlocal-hostname: vm1\n")},
		{Path: "user-data", Data: []byte("#cloud-config\nhostname: vm1\nssh_authorized_keys:\n  - ssh-ed25519 AAAAC3Nza test\n")},
		{Path: "network-config", Data: []byte("version: 2\nethernets:\n  eth0:\n    dhcp4: true\n")},
		{Path: "vendor-data", Data: []byte("#cloud-config\n{}\n")},
	}
}

func config2Entries() []Entry {
	return []Entry{
		{Path: "openstack/latest/meta_data.json", Data: []byte(`{"uuid":"4b9f0c3e-5d2a-4b1e-9f3a-0c1d2e3f4a5b","hostname":"vm1","name":"vm1"}`)},
		{Path: "openstack/latest/user_data", Data: []byte("#cloud-config\nhostname: vm1\n")},
		{Path: "openstack/latest/network_data.json", Data: []byte(`{"links":[{"id":"eth0","type":"phy","ethernet_mac_address":"52:54:00:12:34:56"}],"networks":[{"id":"n0","type":"ipv4_dhcp","link":"eth0"}],"services":[]}`)},
		{Path: "openstack/2012-08-10/meta_data.json", Data: []byte(`{"uuid":"4b9f0c3e-5d2a-4b1e-9f3a-0c1d2e3f4a5b"}`)},
		{Path: "openstack/content/0000", Data: bytes.Repeat([]byte("auto eth0\niface eth0 inet dhcp\n"), 200)},
	}
}

// blkid returns blkid's low-level probe of an image as a map (TYPE, LABEL, ...).
func blkid(tb testing.TB, img string) map[string]string {
	tb.Helper()
	needTool(tb, "blkid", "util-linux")
	out := run(tb, "blkid", "-p", "-o", "export", img)
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// treeFiles reads every regular file under dir into a map keyed by slash path,
// and fails on anything that is neither a regular file nor a directory.
func treeFiles(tb testing.TB, dir string) map[string][]byte {
	tb.Helper()
	got := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			return nil
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			got[filepath.ToSlash(rel)] = b
			return err
		default:
			return fmt.Errorf("unexpected %v entry %s", d.Type(), rel)
		}
	})
	if err != nil {
		tb.Fatalf("walk %s: %v", dir, err)
	}
	return got
}

func compareTree(tb testing.TB, got map[string][]byte, want []Entry) {
	tb.Helper()
	if len(got) != len(want) {
		var names []string
		for k := range got {
			names = append(names, k)
		}
		slices.Sort(names)
		tb.Errorf("extracted %d files %v, want %d", len(got), names, len(want))
	}
	for _, e := range want {
		b, ok := got[e.Path]
		if !ok {
			tb.Errorf("file %q missing from extracted tree", e.Path)
			continue
		}
		if !bytes.Equal(b, e.Data) {
			tb.Errorf("file %q: extracted %d bytes differ from the %d written", e.Path, len(b), len(e.Data))
		}
	}
}

func fileSHA(tb testing.TB, p string) string {
	tb.Helper()
	return testenv.FileSHA256(tb, p)
}
