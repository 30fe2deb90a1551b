package job

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

// TestMatchersAgreeWithRegexps checks each hand-written name matcher against
// the regular expression it replaces, on fixed cases and on strings
// generated from the characters that matter to it.
func TestMatchersAgreeWithRegexps(t *testing.T) {
	cases := []struct {
		name     string
		re       string
		match    func(string) bool
		alphabet string
		fixed    []string
	}{
		{"user", `^[a-z_][a-z0-9_-]{0,31}$`, validUser, "az_09-A.:é",
			[]string{"", "a", "_", "-a", "alice", "Alice", strings.Repeat("a", 32), strings.Repeat("a", 33), "a\n"}},
		{"ifname", `^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$`, validIfname, "aZ09_.-:é",
			[]string{"", "eth0", ".eth", "-x", strings.Repeat("e", 15), strings.Repeat("e", 16), "br-0.10"}},
		{"label", `^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`, validLabel, "aZ09-._é",
			[]string{"", "a", "-", "a-", "-a", "a-b", "a--b", "host01", "a.b"}},
		{"mac", `^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$`, validMAC, "0aF:g-",
			[]string{"", "52:54:00:12:34:56", "52:54:00:12:34:5", "52-54-00-12-34-56", "52:54:00:12:34:56:", "AA:bb:CC:dd:EE:ff"}},
		{"perm", `^0?[0-7]{3,4}$`, validPerm, "01789x",
			[]string{"", "644", "0644", "00644", "10644", "0755", "07555", "888", "64", "777777"}},
		{"secret", `^[A-Za-z0-9_][A-Za-z0-9._-]*$`, validSecretChars, "aZ09_.-/é ",
			[]string{"", "a", ".a", "-a", "_a", "db.pass", "a/b", "a b"}},
		{"crypt", `^\$(1|5|6|2[aby]|y|gy|7)\$[./A-Za-z0-9$=,]+$`, validCrypt, "$1256abygx7./Z=,;",
			[]string{"", "$6$", "$6$salt$hash", "$2a$10$abc", "$2c$10$abc", "$gy$j9T$x", "$y$j9T$x", "$7$x", "$8$x", "6$x", "$6$a b"}},
		{"header line", `^([\x21-\x39\x3b-\x7e]*:|[\t ])`, headerLine, "Ab: \t~\x7f!é-",
			[]string{"", ":", " x", "\tx", "Content-Type: text/plain", "From nobody", "no colon", "é:", "a\x7f:"}},
	}
	rng := rand.New(rand.NewSource(1))
	for _, c := range cases {
		re := regexp.MustCompile(c.re)
		alpha := []rune(c.alphabet)
		check := func(s string) {
			if got, want := c.match(s), re.MatchString(s); got != want {
				t.Errorf("%s(%q) = %v, the regexp %s says %v", c.name, s, got, c.re, want)
			}
		}
		for _, s := range c.fixed {
			check(s)
		}
		for i := 0; i < 20000; i++ {
			n := rng.Intn(20)
			if c.name == "mac" && rng.Intn(2) == 0 {
				n = 17
			}
			var b strings.Builder
			for k := 0; k < n; k++ {
				if c.name == "mac" && k%3 == 2 && rng.Intn(8) != 0 {
					b.WriteByte(':')
					continue
				}
				b.WriteRune(alpha[rng.Intn(len(alpha))])
			}
			s := b.String()
			if c.name == "crypt" && rng.Intn(2) == 0 {
				s = cryptPrefixes[rng.Intn(len(cryptPrefixes))] + s
			}
			check(s)
		}
	}
}
