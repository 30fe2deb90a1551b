package engine

import (
	"errors"
	"fmt"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

// noSecretsDirKeys seal and open the recipes of an engine without a secrets
// directory. The agent always has one (secrets_dir has a default); the
// package's tests set this instead of writing a key file into the working
// directory.
var noSecretsDirKeys *seal.Keyring

// sealRecipe renders rc sealed with the keys of the recipes the engine
// writes (recipe.KeyFile of the secrets directory), creating the key file
// with a new key on first need (docs/security.md, "Recipe key").
func (e *Engine) sealRecipe(rc *recipe.Recipe) (string, error) {
	k := noSecretsDirKeys
	if e.SecretsDir != "" {
		var err error
		if k, err = seal.LoadOrCreate(recipe.KeyFile(e.SecretsDir)); err != nil {
			return "", fmt.Errorf("sealing the recipe: %w", err)
		}
	} else if k == nil {
		return "", errors.New("sealing the recipe: no secrets directory to keep the recipe key in")
	}
	return rc.Element(k)
}
