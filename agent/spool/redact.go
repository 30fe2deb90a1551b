package spool

import (
	"regexp"
	"strings"
	"sync"
)

// Redacted replaces a secret value in a kept failed job.
const Redacted = "<redacted>"

// jsonPair matches a JSON member whose value is a string: the key, the
// separator and the value (escapes kept).
var jsonPair = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"((?:[^"\\]|\\.)*)"(\s*:\s*)"((?:[^"\\]|\\.)*)"`) })

// seedData matches random_seed's inline data.
var seedData = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`("random_seed"\s*:\s*\{[^{}]*?"data"\s*:\s*)"(?:[^"\\]|\\.)*"`)
})

// secretKey reports whether a member named key holds a secret value in
// clear: a password or its hash in any spelling (users[].password and
// password_hash, cloud-init's passwd, hashed_passwd, plain_text_passwd,
// config-2's admin_pass, ...), an inline private key or a Wi-Fi key. A
// *_secret member is a name in the secrets directory, not a secret.
func secretKey(key string) bool {
	k := strings.ToLower(key)
	if strings.HasSuffix(k, "_secret") {
		return false
	}
	return strings.Contains(k, "passw") || strings.Contains(k, "passwd") || k == "admin_pass" ||
		strings.HasSuffix(k, "private_key") || k == "psk"
}

// RedactJob returns a job document with every secret value in clear
// replaced by Redacted (see secretKey; random_seed.data too), byte for byte
// the same otherwise, so that a kept failed job still shows what was wrong
// with it. It works on text, not on a parse: a job kept because it did not
// parse is redacted as well.
func RedactJob(b []byte) []byte {
	out := jsonPair().ReplaceAllFunc(b, func(m []byte) []byte {
		sub := jsonPair().FindSubmatch(m)
		if !secretKey(string(sub[1])) || string(sub[3]) == "" {
			return m
		}
		return []byte(`"` + string(sub[1]) + `"` + string(sub[2]) + `"` + Redacted + `"`)
	})
	return seedData().ReplaceAll(out, []byte(`${1}"`+Redacted+`"`))
}
