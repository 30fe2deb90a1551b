package main

import (
	"bytes"
	"strings"
	"testing"
)

// BenchmarkHookIntact runs "vmpayload hook NAME prepare begin -" in
// process on a domain whose payload image is in place (the common start):
// the hook reads the domain XML, its recipe and UUID, and checks the image.
func BenchmarkHookIntact(b *testing.B) {
	f := newHookFixture(b)
	var out, errb bytes.Buffer
	oldIn, oldLog := hookStdin, hookSyslog
	defer func() { hookStdin, hookSyslog = oldIn, oldLog }()
	hookSyslog = func(string) {}
	args := []string{"hook", "--config", f.config, "hooktest", "prepare", "begin", "-"}
	b.ReportAllocs()
	for b.Loop() {
		hookStdin = strings.NewReader(f.domainXML)
		out.Reset()
		errb.Reset()
		if code := run(args, &out, &errb); code != 0 {
			b.Fatalf("hook: exit %d: %s", code, errb.String())
		}
	}
}
