package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestLibvirtdRecipeReadOnly: after a job with a password, inline file
// content, inline user-data and a generated random seed, a read-only libvirt
// client (virsh -r dumpxml, live and --inactive) sees none of them, nor the
// password's hash: the recipe carries the job sealed. With the key file of
// the engine's secrets directory it opens to the job as built and rebuilds
// the image byte-identical.
func TestLibvirtdRecipeReadOnly(t *testing.T) {
	quiet := quietLog()
	h := systemHost(t, quiet)
	ctx := context.Background()
	name := fmt.Sprintf("seal-ro-%d", os.Getpid())
	dom := defineReal(t, h, testenv.Domain{Name: name}.XML())
	base := t.TempDir()
	secrets := filepath.Join(base, "secrets")
	e := &Engine{Host: h, PayloadDir: filepath.Join(base, "payload"), SecretsDir: secrets, ImageMode: 0o644, ImageGID: -1, Log: quiet, Starts: &Starts{}}
	if err := os.Mkdir(e.PayloadDir, 0o711); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`{"version":1,"domain":%q,"action":"attach","hostname":"ro",
"users":[{"name":"ops","password":"RO-Plain-Pw"}],
"files":[{"path":"/etc/app/token","content":"RO-FILE-CONTENT"}],
"user_data":"#cloud-config\nruncmd:\n  - echo RO-USERDATA\n",
"random_seed":{"generate_bytes":32}}`, name)
	r := runDoc(t, e, doc, "seal-ro")
	if r.State != result.StateDone {
		t.Fatalf("job: %s %+v", r.State, r.Error)
	}
	keys, err := seal.Load(recipe.KeyFile(secrets))
	if err != nil {
		t.Fatalf("the engine made no key file: %v", err)
	}
	var inactive string
	for _, args := range [][]string{{"dumpxml", name}, {"dumpxml", "--inactive", name}} {
		out, err := exec.Command("virsh", append([]string{"-r", "-c", "qemu:///system"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("virsh -r %v: %v %s", args, err, out)
		}
		x := string(out)
		if !strings.Contains(x, "sealed key=") {
			t.Fatalf("virsh -r %v: no sealed recipe:\n%s", args, x)
		}
		inactive = x
		rc, ok, err := recipe.FromDomainXML(x)
		if err != nil || !ok {
			t.Fatalf("virsh -r %v: recipe %v %v", args, ok, err)
		}
		opened := *rc
		if err := opened.Open(keys); err != nil {
			t.Fatal(err)
		}
		secretsInClear := []string{"RO-Plain-Pw", "RO-FILE-CONTENT", "RO-USERDATA", "$6$",
			opened.Job.Users[0].PasswordHash, opened.Job.RandomSeed.Data, "password_hash", "random_seed", "user_data"}
		for _, s := range secretsInClear {
			if strings.Contains(x, s) {
				t.Errorf("virsh -r %v shows %q in clear", args, s)
			}
		}
	}
	rc, _, err := recipe.FromDomainXML(inactive)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(rc.Path); err != nil {
		t.Fatal(err)
	}
	out, err := recipe.Rebuild(ctx, rc, recipe.RebuildOptions{PayloadDir: e.PayloadDir, SecretsDir: secrets, Mode: 0o644, GID: -1, DomainUUID: dom.UUID})
	if err != nil || out != recipe.OutcomeRebuilt {
		t.Fatalf("rebuild from the read-only XML's recipe: %q %v", out, err)
	}
	if r.Payload == nil || r.Payload.SHA256 != rc.SHA256 {
		t.Errorf("the job's image sha256 %+v, the recipe's %s", r.Payload, rc.SHA256)
	}
}
