package agent_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
)

// TestAgentLibvirtdAccess is the report replayed on qemu:///system:
// a plain member of socket_group posts a domain_xml whose disk is a
// root-only host file, with action start. It is refused (403, nothing
// defined); the same job from a member of admin_group is defined and
// started.
func TestAgentLibvirtdAccess(t *testing.T) {
	needLibvirtd(t)
	sfx := userTestSuffix(t, "useradd", "groupadd", "runuser", "curl")
	sockGroup, adminGroup := "vmpxs"+sfx, "vmpxa"+sfx
	addGroup(t, sockGroup)
	addGroup(t, adminGroup)
	plain := addUser(t, "vmpxp"+sfx, sockGroup)
	admin := addUser(t, "vmpxa"+sfx+"u", sockGroup, adminGroup)

	a := newAgent(t, systemURI, "--socket-group", sockGroup, "--admin-group", adminGroup)
	a.start()
	secret := filepath.Join(a.Dir, "root-only.img")
	if err := os.WriteFile(secret, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	disk := fmt.Sprintf(`<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='%s'/><target dev='vdb' bus='virtio'/></disk>`, secret)
	startJob := func(id, name string) string {
		return fmt.Sprintf(`{"version":1,"id":%q,"domain":%q,"hostname":"h","action":"start","domain_xml":%q}`, id, name, qemuXML(name, "pc", disk))
	}

	refused := domainName(t, "access-plain")
	code, ans := postAs(t, plain, a.Socket, startJob("acc-plain", refused))
	if code != http.StatusForbidden {
		t.Fatalf("plain member: status %d %v; want 403", code, ans)
	}
	if out, err := exec.Command("virsh", "-c", systemURI, "dominfo", refused).CombinedOutput(); err == nil {
		t.Fatalf("the refused domain was defined:\n%s", out)
	}

	allowed := domainName(t, "access-admin")
	if code, ans := postAs(t, admin, a.Socket, startJob("acc-admin", allowed)); code != http.StatusAccepted {
		t.Fatalf("admin member: status %d %v; want 202", code, ans)
	}
	r := a.result("acc-admin", "")
	mustDone(t, r)
	if r.Submitter == nil || r.Submitter.User != admin.name || r.Submitter.Via != "peercred" {
		t.Errorf("submitter %+v; want %s via peercred", r.Submitter, admin.name)
	}
	if st := domstate(t, allowed); st != "running" {
		t.Errorf("admin's domain is %q; want running", st)
	}
	if r.State != result.StateDone {
		t.Fatal(r.Error)
	}
}
