package cloudinit

import (
	"os"
	"path/filepath"
	"testing"
)

// Internals the external tests (package cloudinit_test) check.
var HashPassword = hashPassword

const SaltAlphabet = saltAlphabet

// SecretsDir holds the example secrets (host keys) the tests use.
const SecretsDir = "../../../configs/examples/secrets"

// ReadSecret returns the example secret name.
func ReadSecret(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(SecretsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
