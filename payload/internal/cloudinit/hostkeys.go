package cloudinit

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/vmpayload/vmpayload/payload/job"
)

// HostKey is a resolved SSH host key pair as it goes into cloud-config's
// ssh_keys.
type HostKey struct {
	// Type is the ssh_host_keys type (ed25519, ecdsa, rsa).
	Type string
	// Private is the private key text, ending in one newline.
	Private string
	// Public is the public key line: the job's public_key when given,
	// else derived from the private key.
	Public string
}

// minRSABits is the smallest RSA host key accepted; OpenSSH refuses
// shorter ones.
const minRSABits = 2048

// ParseHostKey checks that private (the content of a secret) is an
// unencrypted private key of type typ and returns the pair. public, when
// not empty, must be the same key. Errors never quote the private key.
func ParseHostKey(typ, private, public string) (HostKey, error) {
	text := strings.TrimRight(strings.ReplaceAll(private, "\r\n", "\n"), "\n\t ") + "\n"
	raw, err := ssh.ParseRawPrivateKey([]byte(text))
	if err != nil {
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return HostKey{}, errors.New("the private key is encrypted with a passphrase; sshd needs it unencrypted")
		}
		return HostKey{}, errors.New("it does not hold an OpenSSH or PEM private key")
	}
	var got string
	switch k := raw.(type) {
	case ed25519.PrivateKey, *ed25519.PrivateKey:
		got = job.HostKeyEd25519
	case *ecdsa.PrivateKey:
		got = job.HostKeyECDSA
	case *rsa.PrivateKey:
		got = job.HostKeyRSA
		if k.N.BitLen() < minRSABits {
			return HostKey{}, fmt.Errorf("the RSA key has %d bits; use at least %d", k.N.BitLen(), minRSABits)
		}
	default:
		return HostKey{}, fmt.Errorf("the private key is a %T, not an ed25519, ecdsa or rsa key", raw)
	}
	if got != typ {
		return HostKey{}, fmt.Errorf("the private key is an %s key, not %s", got, typ)
	}
	signer, err := ssh.NewSignerFromKey(raw)
	if err != nil {
		return HostKey{}, fmt.Errorf("deriving the public key: %w", err)
	}
	derived := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	hk := HostKey{Type: typ, Private: text, Public: derived}
	if public != "" {
		pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(public))
		if err != nil {
			return HostKey{}, fmt.Errorf("public_key cannot be read: %w", err)
		}
		if !bytes.Equal(pk.Marshal(), signer.PublicKey().Marshal()) {
			return HostKey{}, fmt.Errorf("public_key %q is not the public half of the private key (that is %q)", strings.TrimSpace(public), derived)
		}
		hk.Public = strings.TrimSpace(public)
	}
	return hk, nil
}
