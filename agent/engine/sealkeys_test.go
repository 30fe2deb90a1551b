package engine

import (
	"testing"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

func init() {
	k, err := seal.Parse("engine test keys", []byte("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"))
	if err != nil {
		panic(err)
	}
	noSecretsDirKeys = k
}

// openedRecipe reads the recipe of domainXML and opens it with the keys of
// an engine without a secrets directory.
func openedRecipe(t *testing.T, domainXML string) (*recipe.Recipe, bool) {
	t.Helper()
	rc, ok, err := recipe.FromDomainXML(domainXML)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		if err := rc.Open(noSecretsDirKeys); err != nil {
			t.Fatal(err)
		}
	}
	return rc, ok
}
