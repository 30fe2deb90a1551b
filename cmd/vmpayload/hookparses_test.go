package main

import (
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// TestHookParsesOnce: the hook parses the domain XML it is given once,
// for the recipe, the UUID and (a restore without a recipe) the files it
// names (before the one domain document: a token scan for the recipe and
// a parse and a decode for the UUID). Not parallel: the counter is the
// process's.
func TestHookParsesOnce(t *testing.T) {
	f := newHookFixture(t)
	noRecipe := f.withoutRecipe(t)
	for _, c := range []struct{ name, xml, op string }{
		{"intact image", f.domainXML, "prepare"},
		{"restore without recipe", noRecipe, "restore"},
	} {
		before := domxml.Parses()
		if code, _, stderr, _ := runHookCLI(t, strings.NewReader(c.xml), "--config", f.config, "hooktest", c.op, "begin", "-"); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		if n := domxml.Parses() - before; n != 1 {
			t.Errorf("%s: the hook parsed %d documents, want 1", c.name, n)
		}
	}
}
