// Package seal keeps secrets out of places that read-only readers see
// (libvirt domain metadata): it encrypts them with a key only root can read.
//
// A key file holds one or more keys, one per line, each the standard base64
// of 32 random bytes; lines that are empty or start with '#' are ignored.
// The last key seals; every key opens. Rotation is appending a new key: new
// blobs use it, blobs sealed with an older key still open while that key
// stays in the file. Hosts that must open each other's blobs (migration
// peers) hold the same file. docs/security.md describes the procedures.
//
// A key's id is derived from the key (16 hex digits), so that a blob names
// the key that opens it without the file naming keys. Sealing is
// deterministic (a synthetic nonce, HMAC-SHA-256 of the associated data and
// the plaintext, as in SIV): the same plaintext, associated data and key give
// the same blob, so a recipe renders to the same text every time. The cipher
// is XChaCha20-Poly1305 under a key derived from the file's key.
package seal

import (
	"bufio"
	"bytes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/crypto/chacha20poly1305"
)

// KeySize is the size of a key in bytes.
const KeySize = 32

// maxFile bounds a key file (thousands of keys).
const maxFile = 1 << 20

// ErrNoKey marks a missing key file or a key a blob names that the key file
// does not hold.
var ErrNoKey = errors.New("sealing key missing")

type key struct {
	id    string
	aead  cipher.AEAD
	nonce []byte // HMAC key of the synthetic nonce
}

// Keyring is the keys of one key file.
type Keyring struct {
	path string
	keys []key // in file order; the last seals
}

// Current returns the id of the key that seals.
func (k *Keyring) Current() string { return k.keys[len(k.keys)-1].id }

// IDs returns the ids of every key, in file order.
func (k *Keyring) IDs() []string {
	ids := make([]string, len(k.keys))
	for i, c := range k.keys {
		ids[i] = c.id
	}
	return ids
}

// Load reads the key file at path. A missing file is an error wrapping
// ErrNoKey that names the file; so is one that holds no key. A key file that
// is not a regular file, is a symlink, is readable or writable by group or
// others, or belongs to another user than the process's is refused: a
// leaked key opens every recipe sealed with it.
func Load(path string) (*Keyring, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading the recipe key file %s: %w: the file does not exist (copy it from the host that wrote the recipe, mode 0600, owner root; docs/security.md)", path, ErrNoKey)
	}
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("reading the recipe key file %s: it is a symlink; a key file must be a regular file", path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the recipe key file %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the recipe key file %s: %w", path, err)
	}
	if err := checkMode(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading the recipe key file %s: %w", path, err)
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("reading the recipe key file %s: more than %d bytes", path, maxFile)
	}
	return Parse(path, b)
}

func checkMode(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("reading the recipe key file %s: it is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("reading the recipe key file %s: mode %04o lets group or others read or write it; chmod 0600 it (and, if it may have leaked, add a new key: docs/security.md)", path, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("reading the recipe key file %s: it belongs to uid %d, not to uid %d that reads it", path, st.Uid, os.Geteuid())
	}
	return nil
}

// Parse reads key file content b (path names it in messages), without Load's
// checks of the file.
func Parse(path string, b []byte) (*Keyring, error) {
	k := &Keyring{path: path}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 4096), maxFile)
	line := 0
	seen := map[string]bool{}
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(t)
		if err != nil || len(raw) != KeySize {
			// never quote the line: it may be a key
			return nil, fmt.Errorf("reading the recipe key file %s: line %d is not the base64 of %d bytes", path, line, KeySize)
		}
		c, err := newKey(raw)
		if err != nil {
			return nil, fmt.Errorf("reading the recipe key file %s: line %d: %w", path, line, err)
		}
		if seen[c.id] {
			continue
		}
		seen[c.id] = true
		k.keys = append(k.keys, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the recipe key file %s: %w", path, err)
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("reading the recipe key file %s: %w: the file holds no key", path, ErrNoKey)
	}
	return k, nil
}

func derive(master []byte, label string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("vmpayload seal v1 " + label))
	return m.Sum(nil)
}

func newKey(raw []byte) (key, error) {
	aead, err := chacha20poly1305.NewX(derive(raw, "encryption"))
	if err != nil {
		return key{}, err
	}
	return key{
		id:    hex.EncodeToString(derive(raw, "id")[:8]),
		aead:  aead,
		nonce: derive(raw, "nonce"),
	}, nil
}

// LoadOrCreate is Load, except that a missing key file is created first
// (mode 0600, one new random key; its directory, when missing, mode 0700).
// Two processes creating it at once agree: the file is linked into place
// only if absent, and the loser reads the winner's.
func LoadOrCreate(path string) (*Keyring, error) {
	k, err := Load(path)
	if err == nil || !errors.Is(err, ErrNoKey) {
		return k, err
	}
	if _, serr := os.Lstat(path); serr == nil {
		// Another process or goroutine linked it in since the Load above
		// (it is complete once linked), or it exists but holds no key,
		// which is an operator's to fix: Load again says which.
		return Load(path)
	}
	if err := Create(path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	return Load(path)
}

// Create writes a new key file at path holding one random key; it fails
// (wrapping os.ErrExist) when the file exists.
func Create(path string) error {
	dir := filepath.Dir(path)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating the recipe key file %s: %w", path, err)
	}
	line, err := NewKeyLine()
	if err != nil {
		return fmt.Errorf("creating the recipe key file %s: %w", path, err)
	}
	content := "# vmpayload recipe sealing keys: the last key seals, every key opens (docs/security.md)\n" + line
	tmp, err := os.CreateTemp(dir, ".recipe-key-*")
	if err != nil {
		return fmt.Errorf("creating the recipe key file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("creating the recipe key file %s: %w", path, err)
	}
	if _, err := tmp.WriteString(content); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("creating the recipe key file %s: %w", path, err)
	}
	// link, not rename: never replace a key file another process made
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("creating the recipe key file %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// NewKeyLine returns a new random key as a key file line (with newline).
func NewKeyLine() (string, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generating a key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(raw) + "\n", nil
}

// Seal encrypts plaintext bound to ad (which Open must be given again) with
// the current key. It returns that key's id and the blob (nonce and
// ciphertext). The same inputs give the same blob.
func (k *Keyring) Seal(plaintext, ad []byte) (id string, blob []byte) {
	c := k.keys[len(k.keys)-1]
	m := hmac.New(sha256.New, c.nonce)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(ad)))
	m.Write(n[:])
	m.Write(ad)
	m.Write(plaintext)
	nonce := m.Sum(nil)[:chacha20poly1305.NonceSizeX]
	return c.id, c.aead.Seal(append([]byte(nil), nonce...), nonce, plaintext, ad)
}

// Open decrypts a blob Seal made with key id and ad. A key the ring does
// not hold is an error wrapping ErrNoKey naming the id and the key file; a
// blob that was altered, or ad that differs, an error saying so.
func (k *Keyring) Open(id string, blob, ad []byte) ([]byte, error) {
	for _, c := range k.keys {
		if c.id != id {
			continue
		}
		ns := chacha20poly1305.NonceSizeX
		if len(blob) < ns+c.aead.Overhead() {
			return nil, fmt.Errorf("opening a blob sealed with key %s: %d bytes is too short", id, len(blob))
		}
		pt, err := c.aead.Open(nil, blob[:ns], blob[ns:], ad)
		if err != nil {
			return nil, fmt.Errorf("opening a blob sealed with key %s: it was altered, or does not belong with what it was stored with", id)
		}
		return pt, nil
	}
	return nil, fmt.Errorf("opening a blob sealed with key %s: %w: the key file %s does not hold that key (it holds %s); copy the key file of the host that wrote it, or append that host's key to it (docs/security.md)", id, ErrNoKey, k.path, strings.Join(k.IDs(), ", "))
}
