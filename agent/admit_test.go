package agent_test

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/api"
	"github.com/vmpayload/vmpayload/agent/api/client"
	pjob "github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// holdPosts is run as a tenant: it opens n connections to the socket, on
// each sends the headers of a POST of the largest body and its first byte,
// says "ready" and holds them until its stdin closes.
const holdPosts = `
import socket, sys
path, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
conns = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{" % size)
    conns.append(s)
print("ready", flush=True)
sys.stdin.read()
`

// TestAdmissionByWeight: a tenant (a real non-root uid on the real socket)
// holds 40 POSTs of the largest body in flight, more than all submission
// slots. Its own further large POST is answered 503, but root's POST and
// another tenant's are admitted and answered while the 40 are still held:
// admission weighs each submission, keeps a reserve for root and gives
// one uid at most half of what tenants may use. On ef40b13 the 40 took
// every slot and root was answered 503.
func TestAdmissionByWeight(t *testing.T) {
	sfx := userTestSuffix(t, "useradd", "groupadd", "runuser", "curl", "python3")
	group := "vmpcs" + sfx
	gid := addGroup(t, group)
	alice, bob := addUser(t, "vmpca"+sfx, group), addUser(t, "vmpcb"+sfx, group)
	sockDir := testenv.WorkDir(t, "vmpx-cost-")
	// SlotWait short so that refusals come quickly; bodies are never cut
	// off, so the held POSTs stay held for the whole test.
	srv := &api.Server{SlotWait: 300 * time.Millisecond, BodyTimeout: time.Hour}
	h := startAgentWith(t, "", nil, agentSetup{srv: srv, sock: filepath.Join(sockDir, "agent.sock"), sockGID: gid})

	hold := exec.Command("runuser", "-u", alice.name, "--", "python3", "-c", holdPosts, h.sock, "40", fmt.Sprint(pjob.MaxJobBytes))
	hold.Stderr = testWriter{t}
	stdin, stdout := startPiped(t, hold)
	defer func() { stdin.Close(); hold.Wait() }()
	if line, err := stdout.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("holding POSTs as %s: %q %v", alice.name, line, err)
	}
	// Alice's share is full once a large POST of hers is refused; until
	// the server has read the held requests' headers one may get in.
	big := fmt.Sprintf(`{"version":1,"id":"cost-alice-%%d","domain":"costvm","hostname":"h","action":"attach","meta_data":{"pad":%q}}`, strings.Repeat("x", pjob.MaxJobBytes-300))
	for i := 0; ; i++ {
		code, ans := postAs(t, alice, h.sock, fmt.Sprintf(big, i))
		if code == http.StatusServiceUnavailable {
			if !strings.Contains(fmt.Sprint(ans["error"]), api.ErrTooManySubmits.Error()) {
				t.Errorf("alice's 503: %v", ans)
			}
			break
		}
		if i > 50 {
			t.Fatalf("alice's large POSTs are still admitted (%d %v) while she holds 40", code, ans)
		}
	}
	// Root is answered while the 40 are held.
	root := client.New(h.sock).HTTP()
	code, _, ans := postJob(t, root, `{"version":1,"id":"cost-root","domain":"costvm","hostname":"h","action":"attach"}`)
	if code != http.StatusAccepted {
		t.Errorf("root's POST while a tenant holds 40 large POSTs: %d %v, want 202", code, ans)
	}
	// So is another tenant.
	if code, ans := postAs(t, bob, h.sock, `{"version":1,"id":"cost-bob","domain":"costvm","hostname":"h","action":"attach"}`); code != http.StatusAccepted {
		t.Errorf("bob's POST while alice holds 40 large POSTs: %d %v, want 202", code, ans)
	}
	// Still held: the python process has not been told to let go.
	if hold.ProcessState != nil {
		t.Fatal("the held POSTs ended early")
	}
}
