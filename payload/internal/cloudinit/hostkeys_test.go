package cloudinit

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestParseHostKey(t *testing.T) {
	ed := ReadSecret(t, "host-ed25519")
	edPub := strings.TrimSpace(ReadSecret(t, "host-ed25519.pub"))
	ecPub := strings.TrimSpace(ReadSecret(t, "host-ecdsa.pub"))
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	smallPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)}))
	encBlock, err := ssh.MarshalPrivateKeyWithPassphrase(small, "c", []byte("pass"))
	if err != nil {
		t.Fatal(err)
	}
	encrypted := string(pem.EncodeToMemory(encBlock))
	for _, c := range []struct {
		name, typ, priv, pub string
		wantErr              string
		wantPub              string
	}{
		{name: "ed25519 derived", typ: "ed25519", priv: ed, wantPub: strings.Join(strings.Fields(edPub)[:2], " ")},
		{name: "ed25519 given with comment", typ: "ed25519", priv: ed, pub: edPub, wantPub: edPub},
		{name: "crlf and trailing blank lines", typ: "ed25519", priv: strings.ReplaceAll(ed, "\n", "\r\n") + "\r\n\r\n", wantPub: strings.Join(strings.Fields(edPub)[:2], " ")},
		{name: "ecdsa", typ: "ecdsa", priv: ReadSecret(t, "host-ecdsa"), pub: ecPub, wantPub: ecPub},
		{name: "rsa", typ: "rsa", priv: ReadSecret(t, "host-rsa")},
		{name: "type mismatch", typ: "rsa", priv: ed, wantErr: "is an ed25519 key, not rsa"},
		{name: "public of another key", typ: "ed25519", priv: ed, pub: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ9UCj6yFbzrJRqgbKp1+pjOWpNQWIeq40ujmhEHvz3p x", wantErr: "not the public half"},
		{name: "not a key", typ: "ed25519", priv: "hello\n", wantErr: "does not hold an OpenSSH or PEM private key"},
		{name: "public key instead of private", typ: "ed25519", priv: edPub, wantErr: "does not hold"},
		{name: "encrypted", typ: "rsa", priv: encrypted, wantErr: "encrypted with a passphrase"},
		{name: "rsa too small", typ: "rsa", priv: smallPEM, wantErr: "1024 bits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hk, err := ParseHostKey(c.typ, c.priv, c.pub)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				for _, line := range strings.Split(c.priv, "\n") {
					if len(line) > 20 && strings.Contains(err.Error(), line) {
						t.Errorf("error quotes the private key: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(hk.Private, "-----\n") || strings.Contains(hk.Private, "\r") || strings.HasSuffix(hk.Private, "\n\n") {
				t.Errorf("private key text not normalised: %q", hk.Private[len(hk.Private)-10:])
			}
			if c.wantPub != "" && hk.Public != c.wantPub {
				t.Errorf("public %q, want %q", hk.Public, c.wantPub)
			}
		})
	}
}
