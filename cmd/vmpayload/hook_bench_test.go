package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkHookIntact runs "vmpayload hook NAME prepare begin -" in
// process on a domain whose payload image is in place (the common start):
// the hook reads the domain XML, its recipe and UUID, and checks the image.
func BenchmarkHookIntact(b *testing.B) {
	dir := b.TempDir()
	payloadDir, secretsDir := filepath.Join(dir, "payload"), filepath.Join(dir, "secrets")
	if err := os.MkdirAll(secretsDir, 0o700); err != nil {
		b.Fatal(err)
	}
	files := map[string]string{
		filepath.Join(secretsDir, "pw"):  "s3cret\n",
		filepath.Join(dir, "job.json"):   testJob,
		filepath.Join(dir, "dom.xml"):    testDomainXML,
		filepath.Join(dir, "agent.yaml"): "payload_dir: " + payloadDir + "\nsecrets_dir: " + secretsDir + "\n",
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"recipe", "--payload-dir", payloadDir, "--secrets-dir", secretsDir, "--domain-xml", filepath.Join(dir, "dom.xml"), filepath.Join(dir, "job.json")}, &out, &errb); code != 0 {
		b.Fatalf("recipe: exit %d: %s", code, errb.String())
	}
	domainXML := out.String()
	oldIn, oldLog := hookStdin, hookSyslog
	defer func() { hookStdin, hookSyslog = oldIn, oldLog }()
	hookSyslog = func(string) {}
	args := []string{"hook", "--config", filepath.Join(dir, "agent.yaml"), "hooktest", "prepare", "begin", "-"}
	b.ReportAllocs()
	for b.Loop() {
		hookStdin = strings.NewReader(domainXML)
		out.Reset()
		errb.Reset()
		if code := run(args, &out, &errb); code != 0 {
			b.Fatalf("hook: exit %d: %s", code, errb.String())
		}
	}
}
