package guest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pimage "github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestJolietKernelE2E: the guest kernel reads the Joliet tree of a config-2
// image vmpayload built (issue 35): cloud-init finds the config drive
// through Rock Ridge as usual, and its runcmd mounts the same CD-ROM with
// -o norock (Joliet only, as Windows reads it) and records every file it
// sees with its SHA-256. Every file of the image must be there, under its
// long name (64 characters, nested), with its bytes. One boot (bookworm,
// q35/SATA), opt-in with VMPAYLOAD_E2E_JOLIET=1: make test judges the
// agent's payloads the same way in test/e2e's TestAgentFullE2E without a
// boot of its own (checkJoliet); this one adds the long nested names.
func TestJolietKernelE2E(t *testing.T) {
	e2e(t)
	if os.Getenv("VMPAYLOAD_E2E_JOLIET") != "1" {
		t.Skip("set VMPAYLOAD_E2E_JOLIET=1 for this extra boot; test/e2e TestAgentFullE2E checks the agent's payloads' Joliet trees in its own boots")
	}
	ctx, img, accel, dir, s := bootSetup(t, Bookworm, 20*time.Minute)
	host := "vmpx-joliet-" + s.token[:6]
	n := netAddrs{mac: "52:54:00:e2:e0:3a", v4: "192.0.2.58", v6: "2001:db8::3a"}
	files := configDriveFiles(host, s, n)
	const listing = "/var/lib/vmpayload-e2e/joliet-sha256"
	files["openstack/latest/user_data"] = strings.Replace(files["openstack/latest/user_data"], "runcmd:\n", fmt.Sprintf(`runcmd:
  - [sh, -c, "mkdir -p /mnt/vmpx-joliet /var/lib/vmpayload-e2e && mount -t iso9660 -o ro,norock \"$(blkid -L config-2)\" /mnt/vmpx-joliet && grep vmpx-joliet /proc/mounts > %[1]s.mount && (cd /mnt/vmpx-joliet && find . -type f -exec sha256sum {} +) > %[1]s; umount /mnt/vmpx-joliet"]
`, listing), 1)
	long := strings.Repeat("j", 64)
	files["openstack/content/0000"] = "auto lo\niface lo inet loopback\n"
	files["vmpx/"+long+"/"+long] = "a file whose name and directory have 64 characters\n"
	spec := pimage.Spec{Media: pimage.MediaISO, Label: "config-2"}
	for p, c := range files {
		spec.Entries = append(spec.Entries, pimage.Entry{Path: p, Data: []byte(c)})
	}
	iso := filepath.Join(dir, "config-2.iso")
	info, err := pimage.Write(ctx, spec, iso, pimage.Options{GID: -1, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if info.ISOLayout != pimage.ISOLayoutJolietTree || !info.Joliet {
		t.Fatalf("image: layout %d, Joliet %v", info.ISOLayout, info.Joliet)
	}
	_, rep := bootReport(ctx, t, img, Options{Machine: "q35", DomainType: accel, NICs: []NIC{{MAC: n.mac}}}, iso, BusSATA, "")
	checkReport(t, rep, host, s, n, "ConfigDrive")
	mounts, sums := rep.Text(listing+".mount"), rep.Text(listing)
	t.Logf("guest mount: %s", strings.TrimSpace(mounts))
	if !strings.Contains(mounts, "norock") {
		t.Errorf("the guest did not mount the image with norock: %q", mounts)
	}
	got := rep.Sums(listing)
	for p, c := range files {
		if h := testenv.SHA256([]byte(c)); got[p] != h {
			t.Errorf("the guest kernel reading Joliet sees %q with sha256 %q, want %s", p, got[p], h)
		}
	}
	if len(got) != len(files) {
		t.Errorf("the guest kernel reading Joliet sees %d files, the image has %d:\n%s", len(got), len(files), sums)
	}
}
