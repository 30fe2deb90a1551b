package job

import (
	"regexp"
	"strings"
	"sync"
)

// The name forms the validator checks on every job. They were package-level
// regexps, whose compilation ran at every start of every subcommand (even
// `vmpayload version`) and again cost time in every `vmpayload build`
// (issue 14). Each matcher below accepts exactly what the regexp in its
// comment accepts; match_test.go compares them on generated strings.

// asciiSet is a set of ASCII bytes.
type asciiSet [2]uint64

func makeSet(chars string) asciiSet {
	var s asciiSet
	for i := 0; i < len(chars); i++ {
		c := chars[i]
		if i+2 < len(chars) && chars[i+1] == '-' {
			for x := c; x <= chars[i+2]; x++ {
				s[x>>6] |= 1 << (x & 63)
			}
			i += 2
			continue
		}
		s[c>>6] |= 1 << (c & 63)
	}
	return s
}

func (s *asciiSet) has(c byte) bool { return c < 128 && s[c>>6]&(1<<(c&63)) != 0 }

// all reports whether every byte of t is in s.
func (s *asciiSet) all(t string) bool {
	for i := 0; i < len(t); i++ {
		if !s.has(t[i]) {
			return false
		}
	}
	return true
}

var (
	setUserFirst = makeSet("a-z_")
	setUserRest  = makeSet("a-z0-9_-")
	setAlnum     = makeSet("A-Za-z0-9")
	setLabel     = makeSet("A-Za-z0-9-")
	setIfFirst   = makeSet("A-Za-z0-9_")
	setIfRest    = makeSet("A-Za-z0-9_.-")
	setHex       = makeSet("0-9A-Fa-f")
	setOctal     = makeSet("0-7")
	setSecret    = makeSet("A-Za-z0-9._-")
	setCryptRest = makeSet("./A-Za-z0-9$=,")
)

// validUser: ^[a-z_][a-z0-9_-]{0,31}$ (user and group names).
func validUser(s string) bool {
	return len(s) >= 1 && len(s) <= 32 && setUserFirst.has(s[0]) && setUserRest.all(s[1:])
}

// validIfname: ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$
func validIfname(s string) bool {
	return len(s) >= 1 && len(s) <= 15 && setIfFirst.has(s[0]) && setIfRest.all(s[1:])
}

// validLabel: ^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$ (one DNS label; the
// caller checks the 63-byte limit).
func validLabel(s string) bool {
	n := len(s)
	return n >= 1 && setAlnum.has(s[0]) && setAlnum.has(s[n-1]) && setLabel.all(s)
}

// validMAC: ^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$
func validMAC(s string) bool {
	if len(s) != 17 {
		return false
	}
	for i := 0; i < 17; i++ {
		if i%3 == 2 {
			if s[i] != ':' {
				return false
			}
		} else if !setHex.has(s[i]) {
			return false
		}
	}
	return true
}

// validPerm: ^0?[0-7]{3,4}$
func validPerm(s string) bool {
	switch len(s) {
	case 3, 4:
		return setOctal.all(s)
	case 5:
		return s[0] == '0' && setOctal.all(s[1:])
	}
	return false
}

// validSecretChars: ^[A-Za-z0-9_][A-Za-z0-9._-]*$
func validSecretChars(s string) bool {
	return len(s) >= 1 && setIfFirst.has(s[0]) && setSecret.all(s[1:])
}

// cryptPrefixes are the crypt(3) hash forms Linux guests understand:
// $1$ (MD5), $5$ (SHA-256), $6$ (SHA-512), $2a/b/y$ (bcrypt), $y$/$gy$
// (yescrypt), $7$ (scrypt).
var cryptPrefixes = []string{"$1$", "$5$", "$6$", "$2a$", "$2b$", "$2y$", "$y$", "$gy$", "$7$"}

// validCrypt: ^\$(1|5|6|2[aby]|y|gy|7)\$[./A-Za-z0-9$=,]+$
func validCrypt(s string) bool {
	for _, p := range cryptPrefixes {
		if rest, ok := strings.CutPrefix(s, p); ok && rest != "" && setCryptRest.all(rest) {
			return true
		}
	}
	return false
}

// setHeaderName is [\x21-\x39\x3b-\x7e]: printable ASCII except ':'.
var setHeaderName = makeSet("\x21-\x39\x3b-\x7e")

// headerLine: ^([\x21-\x39\x3b-\x7e]*:|[\t ]), the test Python's email
// parser applies to a line at the start of a message: a header ("Name:"),
// a continuation, or a unix From.
func headerLine(s string) bool {
	if s != "" && (s[0] == '\t' || s[0] == ' ') {
		return true
	}
	for i := 0; i < len(s); i++ {
		if !setHeaderName.has(s[i]) {
			return s[i] == ':'
		}
	}
	return false
}

// lazyRegexp compiles a regexp at its first use, not at process start.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
