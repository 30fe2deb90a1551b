package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/access"
	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestSecretsByPermissionAsRealUsers runs real throwaway users against the
// agent's socket (SO_PEERCRED) and spool (file owner) on the test driver:
// a member of socket_group may use a secret only if it could read the
// secret's file itself (owner, group, mode in POSIX order, its groups from
// the group database); a refusal is 403 naming the field, with the same
// message for a secret that does not exist, and nothing is queued or
// built; an admin_group member uses any secret. A spool file's group is
// not admin membership (issue 44 items 1 and 5).
func TestSecretsByPermissionAsRealUsers(t *testing.T) {
	sfx := userTestSuffix(t, "useradd", "groupadd", "runuser", "curl")
	sockGroup, adminGroup, tenantGroup := "secs"+sfx, "seca"+sfx, "sect"+sfx
	sockGID, adminGID, tenantGID := addGroup(t, sockGroup), addGroup(t, adminGroup), addGroup(t, tenantGroup)
	member := addUser(t, "secm"+sfx, sockGroup, tenantGroup)
	admin := addUser(t, "secd"+sfx, sockGroup, adminGroup)
	nonMember := addUser(t, "secn"+sfx)

	sockDir := testenv.WorkDir(t, "vmpx-secrets-")
	h := startAgentWith(t, "", nil, agentSetup{sock: filepath.Join(sockDir, "agent.sock"), sockGID: sockGID,
		opts: func(o *agent.Options) { o.Policy = access.NewPolicy(adminGID) }})
	root := client.New(h.sock).HTTP()
	secretsDir := filepath.Join(h.dir, "secrets")
	if err := os.MkdirAll(secretsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := func(name string, uid, gid int, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(secretsDir, name)
		if err := os.WriteFile(p, []byte("Root-Only-S3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	secret("rootpw", 0, 0, 0o600)
	secret("emptyroot", 0, 0, 0o600)
	if err := os.Truncate(filepath.Join(secretsDir, "emptyroot"), 0); err != nil {
		t.Fatal(err)
	}
	secret("memberpw", member.uid, member.gid, 0o600)
	secret("tenantpw", 0, tenantGID, 0o640)
	secret("othersonly", 0, tenantGID, 0o604) // group bits deny the group, other bits allow others
	if _, err := h.host.DefineXML(context.Background(), domainXML("existing", "pc", "")); err != nil {
		t.Fatal(err)
	}
	pwJob := func(id, name string) string {
		return fmt.Sprintf(`{"version":1,"id":%q,"domain":"existing","hostname":"h","action":"attach","users":[{"name":"u","password_secret":%q}]}`, id, name)
	}
	hostKeyJob := func(id, name string) string {
		return fmt.Sprintf(`{"version":1,"id":%q,"domain":"existing","hostname":"h","action":"attach","ssh_host_keys":[{"type":"ed25519","private_key_secret":%q}]}`, id, name)
	}
	// refused posts body as u and returns the one forbidden error's
	// message, checking that the job was not queued.
	refused := func(t *testing.T, u testUser, id, body, field string) string {
		t.Helper()
		code, ans := postAs(t, u, h.sock, body)
		errs, _ := ans["errors"].([]any)
		if code != http.StatusForbidden || len(errs) != 1 {
			t.Fatalf("status %d, answer %v; want 403 with one error", code, ans)
		}
		fe := errs[0].(map[string]any)
		msg, _ := fe["message"].(string)
		if fe["field"] != field || fe["code"] != "forbidden" || !strings.Contains(msg, u.name) || !strings.HasPrefix(msg, field) {
			t.Errorf("error %v; want field %s, code forbidden, naming the field and %s", fe, field, u.name)
		}
		if strings.Contains(fmt.Sprint(ans), "S3cret") {
			t.Errorf("the answer quotes the secret: %v", ans)
		}
		if resp, err := root.Get("http://x/v1/jobs/" + id); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("refused job %s is known to the agent (%v, %v)", id, resp.Status, err)
		} else {
			resp.Body.Close()
		}
		if _, err := os.Stat(filepath.Join(h.spool.Dir(spool.Incoming), id+".json")); err == nil {
			t.Errorf("refused job %s was written into the spool", id)
		}
		return msg
	}
	done := func(t *testing.T, u testUser, id, body string) {
		t.Helper()
		r := postDone(t, u, h.sock, root, id, body)
		if r.Submitter == nil || r.Submitter.UID != uint32(u.uid) {
			t.Fatalf("%+v %+v; want submitted by %s", r, r.Error, u.name)
		}
	}
	payloadFiles := func() []string { return testenv.DirNames(t, h.payload) }

	var rootOnlyMsg string
	t.Run("member refused a root-only secret", func(t *testing.T) {
		rootOnlyMsg = refused(t, member, "m-root", hostKeyJob("m-root", "rootpw"), "ssh_host_keys[0].private_key_secret")
		refused(t, member, "m-root-pw", pwJob("m-root-pw", "rootpw"), "users[0].password_secret")
	})
	t.Run("member refused a missing secret with the same message", func(t *testing.T) {
		msg := refused(t, member, "m-missing", hostKeyJob("m-missing", "nosuchpw"), "ssh_host_keys[0].private_key_secret")
		if strings.ReplaceAll(msg, "nosuchpw", "rootpw") != rootOnlyMsg {
			t.Errorf("a missing secret and a root-only one are told apart:\n%s\n%s", msg, rootOnlyMsg)
		}
	})
	t.Run("member refused when group bits deny and other bits allow", func(t *testing.T) {
		refused(t, member, "m-others", pwJob("m-others", "othersonly"), "users[0].password_secret")
	})
	if got := payloadFiles(); len(got) != 0 {
		t.Errorf("refused jobs built %v", got)
	}
	t.Run("member uses its own secret", func(t *testing.T) {
		done(t, member, "m-own", pwJob("m-own", "memberpw"))
	})
	t.Run("member uses its group's 0640 secret", func(t *testing.T) {
		done(t, member, "m-group", pwJob("m-group", "tenantpw"))
	})
	t.Run("admin uses a root-only secret", func(t *testing.T) {
		done(t, admin, "a-root", pwJob("a-root", "rootpw"))
	})
	t.Run("root uses any secret", func(t *testing.T) {
		code, _, ans := postJob(t, root, pwJob("r-root", "rootpw"))
		if code != http.StatusAccepted {
			t.Fatalf("status %d: %v", code, ans)
		}
		if r := waitJob(t, root, "r-root"); r.State != result.StateDone {
			t.Fatalf("%+v %+v", r, r.Error)
		}
	})

	// dropAs puts a job into incoming/ as a file owned by uid:gid, as if
	// that user had written it.
	dropAs := func(t *testing.T, id string, uid, gid int, body string) result.Result {
		t.Helper()
		tmp := filepath.Join(h.spool.Dir(spool.Incoming), "."+id+".tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(tmp, uid, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(h.spool.Dir(spool.Incoming), id+".json")); err != nil {
			t.Fatal(err)
		}
		return h.result(id)
	}
	t.Run("spool: member refused a root-only secret", func(t *testing.T) {
		r := dropAs(t, "s-root", member.uid, member.gid, pwJob("s-root", "rootpw"))
		r2 := dropAs(t, "s-missing", member.uid, member.gid, pwJob("s-missing", "nosuchpw"))
		for _, r := range []result.Result{r, r2} {
			if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeForbidden || r.Error.Field != "users[0].password_secret" {
				t.Fatalf("result %+v %+v; want failed forbidden on users[0].password_secret", r, r.Error)
			}
		}
		if strings.ReplaceAll(r2.Error.Message, "nosuchpw", "rootpw") != r.Error.Message {
			t.Errorf("the spool tells a missing secret from a root-only one:\n%s\n%s", r2.Error.Message, r.Error.Message)
		}
		if r.Submitter == nil || r.Submitter.UID != uint32(member.uid) || r.Submitter.Via != access.ViaFileOwner {
			t.Errorf("submitter %+v; want %s by file owner", r.Submitter, member.name)
		}
	})
	t.Run("spool: an invalid job tells nothing of a refused secret", func(t *testing.T) {
		// the job is refused for its hostname; its report must not say
		// that the root-only secret it names is empty
		body := strings.Replace(pwJob("s-invalid", "emptyroot"), `"hostname":"h"`, `"hostname":"bad_host!"`, 1)
		r := dropAs(t, "s-invalid", member.uid, member.gid, body)
		if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeInvalidJob {
			t.Fatalf("result %+v %+v; want failed invalid_job", r, r.Error)
		}
		for _, e := range r.Errors {
			if strings.Contains(e.Field, "secret") || strings.Contains(e.Message, "emptyroot") {
				t.Errorf("the report tells about the refused secret: %+v", e)
			}
		}
	})
	t.Run("spool: member uses its group's secret", func(t *testing.T) {
		if r := dropAs(t, "s-group", member.uid, member.gid, pwJob("s-group", "tenantpw")); r.State != result.StateDone {
			t.Fatalf("%+v %+v", r, r.Error)
		}
	})
	t.Run("spool: a file with the admin group's gid is not an admin's", func(t *testing.T) {
		body := fmt.Sprintf(`{"version":1,"id":"s-gid","domain":"gid-defined","hostname":"h","action":"attach","domain_xml":%q}`,
			domainXML("gid-defined", "pc", ""))
		r := dropAs(t, "s-gid", nonMember.uid, adminGID, body)
		if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeForbidden || r.Error.Field != "domain_xml" {
			t.Fatalf("result %+v %+v; want failed forbidden on domain_xml", r, r.Error)
		}
		if _, err := h.host.Domain(context.Background(), "gid-defined"); !libvirtx.IsNotFound(err) {
			t.Errorf("domain_xml of a file with the admin group's gid was defined (lookup: %v)", err)
		}
		// the same file from an admin is defined
		body = strings.ReplaceAll(body, "s-gid", "s-gid-admin")
		if r := dropAs(t, "s-gid-admin", admin.uid, admin.gid, body); r.State != result.StateDone {
			t.Fatalf("admin's file: %+v %+v", r, r.Error)
		}
	})
	t.Run("spool: leaving the admin group revokes a file made before", func(t *testing.T) {
		if _, err := exec.LookPath("gpasswd"); err != nil {
			t.Skip("needs gpasswd")
		}
		// a file the admin made while a member, with the admin group's gid
		body := fmt.Sprintf(`{"version":1,"id":"s-left","domain":"left-defined","hostname":"h","action":"attach","domain_xml":%q}`,
			domainXML("left-defined", "pc", ""))
		tmp := filepath.Join(h.spool.Dir(spool.Incoming), ".s-left.tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(tmp, admin.uid, adminGID); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("gpasswd", "-d", admin.name, adminGroup).CombinedOutput(); err != nil {
			t.Fatalf("gpasswd -d: %v: %s", err, out)
		}
		if err := os.Rename(tmp, filepath.Join(h.spool.Dir(spool.Incoming), "s-left.json")); err != nil {
			t.Fatal(err)
		}
		r := h.result("s-left")
		if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeForbidden || r.Error.Field != "domain_xml" {
			t.Fatalf("result %+v %+v; want failed forbidden on domain_xml", r, r.Error)
		}
		code, ans := postAs(t, admin, h.sock, pwJob("a-left", "rootpw"))
		if code != http.StatusForbidden {
			t.Errorf("a former admin's root-only secret: status %d %v; want 403", code, ans)
		}
	})
}
