package recipe

import "github.com/vmpayload/vmpayload/internal/seal"

// testKeys seals and opens the recipes of the package's tests (a fixed key:
// rendered elements are the same in every run).
var testKeys = mustKeys("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n")

func mustKeys(lines string) *seal.Keyring {
	k, err := seal.Parse("test keys", []byte(lines))
	if err != nil {
		panic(err)
	}
	return k
}
