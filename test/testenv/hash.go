package testenv

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
)

// SHA256 returns the hex sha256 of b.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// FileSHA256 returns the hex sha256 of the file at p; it fails tb when the
// file cannot be read.
func FileSHA256(tb testing.TB, p string) string {
	tb.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	return SHA256(b)
}

// SumOf returns the hex sha256 of the file at p, or "(" + the error + ")"
// when it cannot be read: for a comparison whose failure message says why.
func SumOf(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return SHA256(b)
}

// Gzip returns s compressed with gzip (default level); it fails tb on a
// write error.
func Gzip(tb testing.TB, s string) []byte {
	tb.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}
