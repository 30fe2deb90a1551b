package engine

import (
	"fmt"

	"github.com/vmpayload/vmpayload/internal/seal"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

// recipeKeys returns the keys that seal the recipes the engine writes
// (recipe.KeyFile of the secrets directory), creating the key file with a
// new key on first need (docs/security.md, "Recipe key").
func (e *Engine) recipeKeys() (*seal.Keyring, error) {
	k, err := seal.LoadOrCreate(recipe.KeyFile(e.SecretsDir))
	if err != nil {
		return nil, fmt.Errorf("sealing the recipe: %w", err)
	}
	return k, nil
}
