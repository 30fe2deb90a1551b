package agent_test

// The other ways libvirt moves a domain's state (issue 36 item 2), on the
// system libvirtd with the packaged hook installed and a real agent
// watching: virsh save / restore (also restore --xml), managedsave + start,
// and domrename. Each case checks that the payload is there with the bytes
// the agent built (sha256 equal to the job's result), also when the image
// was deleted before the restore or start (a host reboot emptied the
// payload directory: the hook's rebuild path), or that the operation is
// refused with the hook's one-line message under hook_failure: refuse (a
// secret the rebuild needs is gone); and that the agent deletes nothing a
// saved, managed-saved or renamed domain still needs (events, start-up
// rebuild and orphan collection). Domains are OS-less 64 MiB TCG domains
// named h-moves-*: QEMU opens the payload CD-ROM, no guest boots.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// movesPrefix starts the names of this file's domains; the test hook acts on
// these only.
const movesPrefix = "h-moves-"

// movesEnv is an agent on qemu:///system with the packaged hook installed
// for movesPrefix domains, pointed at the agent's payload and secrets
// directories.
type movesEnv struct {
	a      *agentProc
	hookCf string // the hook's configuration file
	secret string // the password secret every job uses
}

func newMovesEnv(t *testing.T) *movesEnv {
	t.Helper()
	needLibvirtd(t)
	e := &movesEnv{a: newAgent(t, systemURI)}
	for _, d := range []string{e.a.PayloadDir, e.a.SecretsDir} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(e.a.SecretsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	e.secret = filepath.Join(e.a.SecretsDir, "pw")
	if err := os.WriteFile(e.secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.hookCf = filepath.Join(e.a.Dir, "hook.yaml")
	e.setPolicy(t, "refuse")
	agenttest.InstallHook(t, "h-moves", movesPrefix+"*", e.hookCf, e.a.Bin)
	e.a.start()
	return e
}

// setPolicy writes the hook's configuration with hook_failure policy.
// restartAgent restarts the agent (with d's image removed meanwhile when
// removeImage) and runs a probe job for a domain that does not exist: once
// it has a result, the start-up (rebuild, orphan collection) is over. Then
// d's image must be the one its job built.
func (e *movesEnv) restartAgent(t *testing.T, d *movedDomain, removeImage bool, when string) {
	t.Helper()
	e.a.stop()
	if removeImage {
		d.removeImage(t)
	}
	e.a.start()
	if r := e.a.run("probe-"+d.name, job(movesPrefix+"nonexistent", "x", "start")); r.State != result.StateFailed {
		t.Fatalf("probe %+v", r)
	}
	d.checkImage(t, when)
}

func (e *movesEnv) setPolicy(t *testing.T, policy string) {
	t.Helper()
	cf := fmt.Sprintf("payload_dir: %s\nsecrets_dir: %s\nhook_failure: %s\n", e.a.PayloadDir, e.a.SecretsDir, policy)
	if err := os.WriteFile(e.hookCf, []byte(cf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hideSecret moves the job's password secret away until the returned
// function puts it back (also at the end of the test).
func (e *movesEnv) hideSecret(t *testing.T) (restore func()) {
	t.Helper()
	if err := os.Rename(e.secret, e.secret+".away"); err != nil {
		t.Fatal(err)
	}
	done := false
	restore = func() {
		if !done {
			done = true
			if err := os.Rename(e.secret+".away", e.secret); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(restore)
	return restore
}

// movedDomain is a domain with a payload the agent built.
type movedDomain struct {
	name, uuid string
	img, sha   string // the image the agent built and its sha256
}

// domain defines an OS-less domain named h-moves-<what>-<rand> and runs a
// job (action) for it; it is destroyed and undefined (with its managed save)
// at the end of the test.
func (e *movesEnv) domain(t *testing.T, what, action string) *movedDomain {
	t.Helper()
	name := movesPrefix + what + "-" + testenv.RandHex(t, 3)
	t.Cleanup(func() { removeMoved(name) })
	d := &movedDomain{name: name, uuid: defineDomain(t, e.a.Dir, name, "pc", "")}
	j := job(name, "hm-"+what, action)
	j["users"] = []map[string]any{{"name": "ops", "password_secret": "pw"}}
	r := e.a.run("job-"+name, j)
	mustDone(t, r)
	if r.Payload == nil || r.Payload.Path == "" || r.Payload.SHA256 == "" {
		t.Fatalf("job result without a payload: %+v", r)
	}
	d.img, d.sha = r.Payload.Path, r.Payload.SHA256
	d.checkImage(t, "after the job")
	return d
}

// removeMoved destroys and undefines a domain, its managed save included.
func removeMoved(name string) {
	_ = exec.Command("virsh", "-q", "-c", systemURI, "destroy", name).Run()
	_ = exec.Command("virsh", "-q", "-c", systemURI, "undefine", name, "--managed-save").Run()
}

// checkImage asserts that the image the agent built is in place with its
// bytes.
func (d *movedDomain) checkImage(t *testing.T, when string) {
	t.Helper()
	b, err := os.ReadFile(d.img)
	if err != nil {
		t.Fatalf("%s: payload image of %s: %v", when, d.name, err)
	}
	if got := testenv.SHA256(b); got != d.sha {
		t.Fatalf("%s: payload image of %s has sha256 %s, the agent built %s", when, d.name, got, d.sha)
	}
}

// removeImage deletes the image, as a host reboot empties the payload
// directory (a tmpfs).
func (d *movedDomain) removeImage(t *testing.T) {
	t.Helper()
	if err := os.Remove(d.img); err != nil {
		t.Fatal(err)
	}
}

// checkRunning asserts the domain runs with the image in its live drive and
// the image in place.
func (d *movedDomain) checkRunning(t *testing.T, when string) {
	t.Helper()
	if s := domstate(t, d.name); s != "running" {
		t.Fatalf("%s: %s is %q, want running", when, d.name, s)
	}
	checkDrive(t, d.name, false, "ide", d.img)
	d.checkImage(t, when)
}

// refusedBy asserts that err/out are a failed operation carrying the hook's
// one line for d: a rebuild that needs the hidden secret.
func (d *movedDomain) refusedBy(t *testing.T, op, out string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded with the image missing and the secret gone:\n%s", op, out)
	}
	want := "vmpayload hook: domain " + d.name + ": rebuilding the payload image " + d.img + ": users[0].password_secret: secret \"pw\" does not exist"
	if !strings.Contains(out, want) {
		t.Fatalf("%s error lacks the hook's line %q:\n%s", op, want, out)
	}
	if exists(d.img) {
		t.Fatalf("%s: an image was written although the secret is gone", op)
	}
	t.Logf("%s refused: %s", op, out)
}

// eventWatch reads the agent's /v1/events stream.
type eventWatch struct {
	evs    chan agent.Event
	cancel context.CancelFunc
}

// watch subscribes to the agent's events; call it before the operation
// whose events are awaited.
func (e *movesEnv) watch(t *testing.T) *eventWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, client.URL("/v1/events"), nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	resp, err := e.a.Client().HTTP().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &eventWatch{evs: make(chan agent.Event, 256), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev agent.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				w.evs <- ev
			}
		}
		close(w.evs)
	}()
	t.Cleanup(cancel)
	return w
}

// until waits for a domain event of typ for domain name. The agent
// publishes a lifecycle event after acting on it, and libvirt's events
// arrive in order: once it is seen, the agent has handled every earlier
// event.
func (w *eventWatch) until(t *testing.T, typ, name string) {
	t.Helper()
	deadline := time.After(resultWait)
	for {
		select {
		case ev, ok := <-w.evs:
			if !ok {
				t.Fatalf("event stream ended before %s of %s", typ, name)
			}
			if ev.Kind == "domain" && ev.Type == typ && ev.Domain == name {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event for %s", typ, name)
		}
	}
}

// stripMetadata returns domain XML without its <metadata> element.
func stripMetadata(x string) string {
	return regexp.MustCompile(`(?s)\s*<metadata>.*</metadata>`).ReplaceAllString(x, "")
}

func TestMovesLibvirtd(t *testing.T) {
	e := newMovesEnv(t)

	// virsh save / restore. A saved persistent domain is shut off with a
	// state file that names the same media; the agent must keep its image.
	t.Run("save-restore", func(t *testing.T) {
		d := e.domain(t, "save", "start")
		d.checkRunning(t, "started by the job")
		state := filepath.Join(e.a.Dir, d.name+".save")
		save := func() {
			t.Helper()
			w := e.watch(t)
			virsh(t, "save", d.name, state)
			w.until(t, "stopped", d.name)
			if s := domstate(t, d.name); s != "shut off" {
				t.Fatalf("after save %s is %q", d.name, s)
			}
		}

		save()
		d.checkImage(t, "saved, the agent saw it stop")
		virsh(t, "restore", state)
		d.checkRunning(t, "restored")

		// The payload directory emptied while saved: restore begin rebuilds.
		save()
		d.removeImage(t)
		virsh(t, "restore", state)
		d.checkRunning(t, "restored with the image deleted")

		// ... and a rebuild that cannot be made refuses the restore; the
		// state file is kept and restores once the secret is back.
		save()
		d.removeImage(t)
		back := e.hideSecret(t)
		out, err := testenv.VirshTry(systemURI, "restore", state)
		d.refusedBy(t, "restore", out, err)
		if s := domstate(t, d.name); s != "shut off" {
			t.Fatalf("after the refused restore %s is %q", d.name, s)
		}
		back()
		virsh(t, "restore", state)
		d.checkRunning(t, "restored after the secret came back")

		// The agent restarts while the domain is saved and its image is
		// gone: its start-up rebuild puts it back from the persistent
		// definition's recipe and orphan collection keeps it.
		save()
		e.restartAgent(t, d, true, "agent restarted while the domain was saved")
		virsh(t, "restore", state)
		d.checkRunning(t, "restored after the agent restarted")

		// restore --xml: the XML given replaces the saved one. With the
		// <metadata> kept (here a changed <description>) the recipe still
		// rebuilds a deleted image.
		save()
		saved := virsh(t, "save-image-dumpxml", state)
		if !strings.Contains(saved, d.sha) {
			t.Fatalf("the state file's XML lacks the recipe:\n%s", saved)
		}
		withDesc := filepath.Join(e.a.Dir, d.name+"-desc.xml")
		if err := os.WriteFile(withDesc, []byte(strings.Replace(saved, "</name>", "</name>\n  <description>restored with --xml</description>", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		d.removeImage(t)
		virsh(t, "restore", state, "--xml", withDesc)
		d.checkRunning(t, "restored --xml (metadata kept) with the image deleted")

		// With the <metadata> dropped and the image present, the restore
		// runs with the same medium (nothing to rebuild).
		save()
		noMeta := filepath.Join(e.a.Dir, d.name+"-nometa.xml")
		if err := os.WriteFile(noMeta, []byte(stripMetadata(saved)), 0o644); err != nil {
			t.Fatal(err)
		}
		virsh(t, "restore", state, "--xml", noMeta)
		d.checkRunning(t, "restored --xml (metadata dropped)")

		// With the <metadata> dropped and the image gone, the hook cannot
		// rebuild it and refuses: QEMU would resume the guest with its
		// CD-ROM emptied under it (startupPolicy='optional').
		save()
		d.removeImage(t)
		out, err = testenv.VirshTry(systemURI, "restore", state, "--xml", noMeta)
		if err == nil {
			t.Fatalf("restore --xml without the recipe and with the image gone succeeded:\n%s", out)
		}
		want := "vmpayload hook: domain " + d.name + ": the payload image " + d.img + " is missing and the domain XML given to the restore carries no recipe"
		if !strings.Contains(out, want) {
			t.Fatalf("restore error lacks %q:\n%s", want, out)
		}
		t.Logf("restore --xml without the recipe refused: %s", out)
		// Under hook_failure: boot it resumes with the drive empty.
		e.setPolicy(t, "boot")
		virsh(t, "restore", state, "--xml", noMeta)
		e.setPolicy(t, "refuse")
		if s := domstate(t, d.name); s != "running" {
			t.Fatalf("restore under boot: %s is %q", d.name, s)
		}
		checkDrive(t, d.name, false, "ide", "")
		if exists(d.img) {
			t.Fatalf("an image appeared without a recipe")
		}
		os.Remove(state)
	})

	// managedsave + start: the start restores the managed save image; its
	// XML (with the recipe) goes to restore begin and prepare begin.
	t.Run("managedsave", func(t *testing.T) {
		d := e.domain(t, "msave", "start")
		d.checkRunning(t, "started by the job")
		msave := func() {
			t.Helper()
			w := e.watch(t)
			virsh(t, "managedsave", d.name)
			w.until(t, "stopped", d.name)
			if !strings.Contains(virsh(t, "list", "--all", "--name", "--with-managed-save"), d.name) {
				t.Fatalf("%s has no managed save", d.name)
			}
		}

		msave()
		d.checkImage(t, "managed-saved, the agent saw it stop")
		virsh(t, "start", d.name)
		d.checkRunning(t, "started from the managed save")

		msave()
		d.removeImage(t)
		virsh(t, "start", d.name)
		d.checkRunning(t, "started from the managed save with the image deleted")

		// The agent restarts while the domain is managed-saved and its
		// image is gone: start-up rebuild, orphan collection keeps it.
		msave()
		e.restartAgent(t, d, true, "agent restarted while the domain was managed-saved")
		virsh(t, "start", d.name)
		d.checkRunning(t, "started from the managed save after the agent restarted")

		msave()
		d.removeImage(t)
		back := e.hideSecret(t)
		out, err := testenv.VirshTry(systemURI, "start", d.name)
		d.refusedBy(t, "start from the managed save", out, err)
		if !strings.Contains(out, d.name+" restore begin") {
			t.Errorf("the refused start's hook call was not restore begin:\n%s", out)
		}
		if !strings.Contains(virsh(t, "list", "--all", "--name", "--with-managed-save"), d.name) {
			t.Fatalf("the refused start lost the managed save of %s", d.name)
		}
		back()
		virsh(t, "start", d.name)
		d.checkRunning(t, "started from the managed save after the secret came back")
	})

	// A job changes the payload of a managed-saved domain. The start
	// resumes the saved guest, which already read its medium: it must get
	// the old image back (libvirt restores the saved XML); the new one is
	// for the next cold boot, as for any persistent change. The job here
	// also rotated the password secret, so the old image could not be
	// rebuilt by the hook any more: the agent must not delete it while the
	// managed save names it, nor while the resumed domain runs with it.
	t.Run("managedsave-job", func(t *testing.T) {
		d := e.domain(t, "msjob", "start")
		d.checkRunning(t, "started by the job")
		w := e.watch(t)
		virsh(t, "managedsave", d.name)
		w.until(t, "stopped", d.name)
		old, oldSHA := d.img, d.sha
		if err := os.WriteFile(e.secret, []byte("r0tated\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.WriteFile(e.secret, []byte("s3cret\n"), 0o600) })
		j := job(d.name, "hm-msjob2", "attach")
		j["users"] = []map[string]any{{"name": "ops", "password_secret": "pw"}}
		r := e.a.run("job2-"+d.name, j)
		mustDone(t, r)
		if r.Payload == nil || r.Payload.Path == old {
			t.Fatalf("second job: %+v", r)
		}
		d.checkImage(t, "the job on the managed-saved domain: its saved image")
		checkDrive(t, d.name, true, "ide", r.Payload.Path)

		virsh(t, "start", d.name)
		d.checkRunning(t, "resumed from the managed save")

		// The agent restarts while the resumed domain runs with the old
		// image: orphan collection keeps both.
		e.restartAgent(t, d, false, "agent restarted while the resumed domain runs with the old image")

		// A cold boot takes the new payload.
		virsh(t, "destroy", d.name)
		d.img, d.sha = r.Payload.Path, r.Payload.SHA256
		virsh(t, "start", d.name)
		d.checkRunning(t, "cold boot after the job")
		_ = oldSHA
	})

	// domrename: libvirt undefines the old name and defines the new one
	// with the same UUID (lifecycle events "Undefined Renamed" and "Defined
	// Renamed"). Payload images are named by the UUID and the recipe names
	// the path, so nothing about the payload depends on the name; the agent
	// must not take the rename for an undefine.
	t.Run("rename", func(t *testing.T) {
		d := e.domain(t, "ren", "attach")
		old := d.name
		d.name = movesPrefix + "renamed-" + testenv.RandHex(t, 3)
		t.Cleanup(func() { removeMoved(d.name) })
		w := e.watch(t)
		virsh(t, "domrename", old, d.name)
		w.until(t, "defined", d.name)
		if u := strings.TrimSpace(virsh(t, "domuuid", d.name)); u != d.uuid {
			t.Fatalf("renamed domain has UUID %s, want %s", u, d.uuid)
		}
		d.checkImage(t, "renamed, the agent saw the rename")
		virsh(t, "start", d.name)
		d.checkRunning(t, "renamed and started")

		virsh(t, "destroy", d.name)
		d.removeImage(t)
		virsh(t, "start", d.name)
		d.checkRunning(t, "renamed, started with the image deleted")

		// Without the secret the start of the renamed domain is refused
		// with the hook's line (naming the new name).
		virsh(t, "destroy", d.name)
		d.removeImage(t)
		back := e.hideSecret(t)
		out, err := testenv.VirshTry(systemURI, "start", d.name)
		d.refusedBy(t, "start of the renamed domain", out, err)
		back()
		virsh(t, "start", d.name)
		d.checkRunning(t, "renamed, started after the secret came back")

		// The agent restarts: the renamed domain's image is kept.
		e.restartAgent(t, d, false, "renamed, agent restarted")

		// A job for the new name changes its media.
		j := job(d.name, "hm-ren2", "attach")
		j["users"] = []map[string]any{{"name": "ops", "password_secret": "pw"}}
		r := e.a.run("job2-"+d.name, j)
		mustDone(t, r)
		if r.DomainUUID != d.uuid || r.Payload == nil || r.Payload.SHA256 == d.sha {
			t.Fatalf("job on the renamed domain: %+v", r)
		}
		d.img, d.sha = r.Payload.Path, r.Payload.SHA256
		d.checkRunning(t, "renamed, new job")
	})
}
