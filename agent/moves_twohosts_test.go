package agent_test

// The two-host ways libvirt moves a domain (issue 36 item 2): virsh migrate
// --offline and virsh dumpxml | virsh define on another host, between two
// private libvirtd "hosts" on this machine (test/hosts.sh: each its own
// mount namespace, the packaged hook, its own agent; the payload directory
// is one path on both, per host or shared). The recipe travels in the
// domain XML; the destination's hook builds the image there with the bytes
// the source's agent built, or refuses the start under hook_failure:
// refuse when it cannot.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/hosts"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// twoHosts is a started test/hosts.sh set of two hosts.
type twoHosts struct{ *hosts.Set }

func startTwoHosts(t *testing.T) *twoHosts {
	t.Helper()
	needLibvirtd(t)
	return &twoHosts{hosts.Start(t, hosts.Options{Prefix: "h-moves-2h-", Secrets: map[string]string{"pw": "s3cret\n"}})}
}

func (h *twoHosts) uri(i int) string { return h.Host(i).URI }

// virsh runs virsh on host i and fails the test on an error.
func (h *twoHosts) virsh(t *testing.T, i int, args ...string) string {
	t.Helper()
	return h.Host(i).Virsh(t, args...)
}

func (h *twoHosts) virshTry(i int, args ...string) (string, error) {
	return h.Host(i).VirshTry(args...)
}

// hideSecret moves host i's password secret away until restore.
func (h *twoHosts) hideSecret(t *testing.T, i int) (restore func()) {
	t.Helper()
	p := filepath.Join(h.Host(i).Dir, "secrets", "pw")
	if err := os.Rename(p, p+".away"); err != nil {
		t.Fatal(err)
	}
	done := false
	restore = func() {
		if !done {
			done = true
			if err := os.Rename(p+".away", p); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(restore)
	return restore
}

// domain defines an OS-less domain on host i and has host i's agent attach a
// payload (through its socket); it returns the domain and the image path
// and sha256 of the result.
func (h *twoHosts) domain(t *testing.T, i int, what string) (name, img, sum string) {
	t.Helper()
	name = movesPrefix + what + "-" + testenv.RandHex(t, 3)
	p := filepath.Join(h.Dir, name+".xml")
	if err := os.WriteFile(p, []byte(qemuXML(name, "pc", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	h.virsh(t, i, "define", p)
	j := job(name, "hm-"+what, "attach")
	j["id"] = "job-" + name
	j["users"] = []map[string]any{{"name": "ops", "password_secret": "pw"}}
	r, err := h.submit(t, i, j)
	if err != nil {
		t.Fatal(err)
	}
	mustDone(t, r)
	if r.Payload == nil || r.Payload.SHA256 == "" {
		t.Fatalf("job result without a payload: %+v", r)
	}
	return name, r.Payload.Path, r.Payload.SHA256
}

// probe runs a job for a domain that does not exist through host i's
// agent: once it has a result, the agent's start-up (rebuild, orphan
// collection: before any job) is over.
func (h *twoHosts) probe(t *testing.T, i int) {
	t.Helper()
	id := "probe-" + testenv.RandHex(t, 4)
	if r, err := h.submit(t, i, map[string]any{"version": 1, "id": id, "domain": movesPrefix + "nonexistent", "action": "start"}); err != nil || r.State != result.StateFailed {
		t.Fatalf("probe on host %d: %+v %v", i, r, err)
	}
}

// submit submits job j through host i's agent socket and waits for its
// final result.
func (h *twoHosts) submit(t *testing.T, i int, j map[string]any) (result.Result, error) {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(h.Host(i).AgentSock)
	ctx, cancel := context.WithTimeout(context.Background(), resultWait)
	defer cancel()
	if _, code, err := c.Submit(ctx, b); err != nil || code/100 != 2 {
		t.Fatalf("submitting %v to host %d: %d %v", j["id"], i, code, err)
	}
	return agenttest.WaitFinal(ctx, c, j["id"].(string), 10*time.Second, 18)
}

// checkRunning asserts domain name runs on host i with img in its live
// drive, and that the file there has sum.
func (h *twoHosts) checkRunning(t *testing.T, i int, name, img, file, sum, when string) {
	t.Helper()
	if s := h.virsh(t, i, "domstate", name); s != "running" {
		t.Fatalf("%s: %s on host %d is %q, want running", when, name, i, s)
	}
	if l := h.virsh(t, i, "domblklist", name); !strings.Contains(l, img) {
		t.Fatalf("%s: live drives of %s on host %d lack %s:\n%s", when, name, i, img, l)
	}
	if got := testenv.SumOf(file); got != sum {
		t.Fatalf("%s: image on host %d has sha256 %s, the agent built %s", when, i, got, sum)
	}
}

// startRebuilt starts domain name on host i and checks it runs with the
// image (checkRunning); then, as after a reboot of host i that emptied its
// payload directory, destroys it, removes the image file and starts it
// again: the hook (prepare begin) rebuilds the image.
func (h *twoHosts) startRebuilt(t *testing.T, i int, name, img, file, sum, when string) {
	t.Helper()
	h.virsh(t, i, "start", name)
	h.checkRunning(t, i, name, img, file, sum, when)
	h.virsh(t, i, "destroy", name)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	h.virsh(t, i, "start", name)
	h.checkRunning(t, i, name, img, file, sum, when+" with the image deleted")
}

// refused asserts a start or migration failed with the hook's line for a
// rebuild that needs the hidden secret.
func refused(t *testing.T, name, img, out string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("succeeded with the image missing and the secret gone:\n%s", out)
	}
	want := "vmpayload hook: domain " + name + ": rebuilding the payload image " + img + ": users[0].password_secret: secret \"pw\" does not exist"
	if !strings.Contains(out, want) {
		t.Fatalf("error lacks the hook's line %q:\n%s", want, out)
	}
	t.Logf("refused: %s", out)
}

func TestMovesTwoHosts(t *testing.T) {
	h := startTwoHosts(t)

	// virsh migrate --offline --persistent --undefinesource: the definition
	// (with the recipe) moves to host 2, no state. Observed: host 2's
	// hook runs at migrate begin and builds the image already; libvirt
	// sends host 1 no undefine event, so host 1's agent keeps its copy
	// until its next start collects it as an orphan.
	var name, img, sum string
	t.Run("offline-migrate", func(t *testing.T) {
		name, img, sum = h.domain(t, 1, "off")
		src, dst := h.Storage(1, img, "local"), h.Storage(2, img, "local")
		if got := testenv.SumOf(src); got != sum {
			t.Fatalf("image on host 1: %s, result %s", got, sum)
		}
		// Without the secret on host 2 its hook cannot build the image at
		// migrate begin: the migration is refused with the hook's line and
		// the domain stays on host 1.
		back := h.hideSecret(t, 2)
		out, err := h.virshTry(1, "migrate", "--offline", "--persistent", "--undefinesource", name, h.uri(2))
		refused(t, name, img, out, err)
		if !strings.Contains(out, name+" migrate begin") {
			t.Errorf("the refused migration's hook call was not migrate begin:\n%s", out)
		}
		if l := h.virsh(t, 1, "list", "--all", "--name"); !strings.Contains(l, name) {
			t.Fatalf("%s left host 1 although the migration was refused", name)
		}
		if l := h.virsh(t, 2, "list", "--all", "--name"); strings.Contains(l, name) {
			t.Fatalf("%s is defined on host 2 although the migration was refused", name)
		}
		back()

		h.virsh(t, 1, "migrate", "--offline", "--persistent", "--undefinesource", name, h.uri(2))
		if l := h.virsh(t, 1, "list", "--all", "--name"); strings.Contains(l, name) {
			t.Fatalf("%s still defined on host 1 after --undefinesource", name)
		}
		md := h.virsh(t, 2, "metadata", name, recipe.Namespace, "--config")
		if !strings.Contains(md, sum) {
			t.Fatalf("the recipe did not travel: host 2's metadata:\n%s", md)
		}
		t.Logf("after the offline migration: host 2's image %s (migrate begin), host 1's copy %s", testenv.SumOf(dst), testenv.SumOf(src))
		h.startRebuilt(t, 2, name, img, dst, sum, "started on host 2")

		// Host 2's agent restarts: it adopts the domain (orphan
		// collection keeps the image).
		h.AgentCtl("restart", 2)
		h.probe(t, 2)
		if got := testenv.SumOf(dst); got != sum {
			t.Fatalf("host 2's image after its agent restarted: %s, want %s", got, sum)
		}

		// Without the secret on host 2 the start is refused.
		h.virsh(t, 2, "destroy", name)
		if err := os.Remove(dst); err != nil {
			t.Fatal(err)
		}
		back = h.hideSecret(t, 2)
		out, err = h.virshTry(2, "start", name)
		refused(t, name, img, out, err)
		if _, err := os.Lstat(dst); err == nil {
			t.Fatalf("an image was written on host 2 although the secret is gone")
		}
		back()
	})
	if name == "" {
		return
	}

	// virsh dumpxml | virsh define on another host: host 2's definition is
	// defined on host 1 (whose stale copy is removed first: a fresh host).
	t.Run("define-elsewhere", func(t *testing.T) {
		x := h.virsh(t, 2, "dumpxml", "--inactive", name)
		p := filepath.Join(h.Dir, name+"-moved.xml")
		if err := os.WriteFile(p, []byte(x), 0o644); err != nil {
			t.Fatal(err)
		}
		dst := h.Storage(1, img, "local")
		if err := os.Remove(dst); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		h.virsh(t, 1, "define", p)
		h.virsh(t, 1, "start", name)
		h.checkRunning(t, 1, name, img, dst, sum, "defined from host 2's XML and started on host 1")

		h.virsh(t, 1, "destroy", name)
		if err := os.Remove(dst); err != nil {
			t.Fatal(err)
		}
		back := h.hideSecret(t, 1)
		out, err := h.virshTry(1, "start", name)
		refused(t, name, img, out, err)
		back()
		h.virsh(t, 1, "start", name)
		h.checkRunning(t, 1, name, img, dst, sum, "started on host 1 after the secret came back")
	})

	// The same offline migration with one payload directory both hosts see
	// (NFS-like): the destination finds the image intact; deleted, its hook
	// rebuilds it.
	t.Run("offline-migrate-shared", func(t *testing.T) {
		// The agents restart after the switch (test/hosts.sh: so that they
		// see the new directory from their start).
		h.Layout("shared")
		h.AgentCtl("restart", 1)
		h.AgentCtl("restart", 2)
		n, im, s := h.domain(t, 1, "offsh")
		f := h.Storage(1, im, "shared")
		if got := testenv.SumOf(f); got != s {
			t.Fatalf("image in the shared directory: %s, result %s", got, s)
		}
		h.virsh(t, 1, "migrate", "--offline", "--persistent", "--undefinesource", n, h.uri(2))
		if got := testenv.SumOf(f); got != s {
			t.Fatalf("shared image after the offline migration: %s, want %s", got, s)
		}
		h.startRebuilt(t, 2, n, im, f, s, "started on host 2 (shared)")
	})
}
