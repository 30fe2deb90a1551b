package cloudinit

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// sameAsGoYAML checks fastYAML against go-yaml on v: when fastYAML writes
// v its bytes must be go-yaml's; it reports whether fastYAML wrote it.
func sameAsGoYAML(t testing.TB, v any) bool {
	t.Helper()
	want, err := goYAML(v)
	if err != nil {
		t.Fatalf("go-yaml: %v", err)
	}
	got, ok := fastYAML(v)
	if ok && !bytes.Equal(got, want) {
		t.Fatalf("fastYAML differs from go-yaml for %#v\nfast:\n%s\ngo-yaml:\n%s", v, got, want)
	}
	return ok
}

// styleCases are strings with what go-yaml does with them, and whether the
// fast path writes them (fast) or leaves them to go-yaml.
var styleCases = []struct {
	s    string
	fast bool
}{
	{"", true},
	{"plain", true},
	{"with spaces  inside", true},
	{"ALL=(ALL) NOPASSWD:ALL", true},
	{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAMmjD6jou8MNNJHmnk3ekQ6Tr9SBDqVj2q8F2+//2aG alice@example", true},
	{"$6$salt$hash./x", true},
	{"/bin/bash", true},
	{"_x", true},
	{"a:b", true},
	{"a#b", true},
	{"a,b[c]{d}?", true},
	{"y", true}, {"Yes", true}, {"off", true}, {"NULL", true}, {"True", true}, {"n", true},
	{"yes please", true},
	{"0644", true},
	{"123456789012345678", true},
	{"1234567890123456789", false},
	{"192.0.2.10/24", true},
	{"192.0.2.1", true},
	{"2001:db8::1/64", true},
	{"2001:db8::1", true},
	{"52:54:00:12:34:56", true},
	{"52:54:00:ab:cd:ef", true},
	{"1:20", true},
	{"190:20:30.15", true},
	{"1.5", false}, {"1e5", false}, {"0x1f", false}, {"0o17", false}, {"0b101", false}, {"1_000", false},
	{"2001-12-14", false}, {"1.", false}, {"12 34", false},
	// UUIDs (instance-ids) starting with a digit, and near misses
	{"004dcf1b-442d-8fc3-a048-bf3d32caa493", true},
	{"12345678-1234-1234-1234-123456789012", true},
	{"1234567e-1234-1234-1234-123456789012", true},
	{"9ABCDEF0-1234-5678-9ABC-DEF012345678", true},
	{"12345678-1234-1234-1234-12345678901", false},
	{"1234-5678-1234-1234-123456789012abcd", false},
	{"12345678123412341234123456789012", false},
	{"12345678-1234-1234-1234-12345678901g", false},
	{"fe80::", false},
	{"a: b", false}, {"a #b", false}, {"a:", false},
	{" lead", false}, {"trail ", false},
	{"-x", false}, {"- x", false}, {"---", false}, {".inf", false}, {"~", false}, {"<<", false},
	{"*ref", false}, {"&a", false}, {"!tag", false}, {"%x", false}, {"@x", false}, {"`x", false},
	{"'q'", false}, {"\"q\"", false}, {"#c", false}, {"|x", false}, {">x", false}, {"?x", false}, {":x", false},
	{"[x]", false}, {"{x}", false}, {",x", false},
	{"tab\there", false}, {"caf\u00e9", false}, {"nul\x00", false}, {"del\x7f", false},
	{"line\n", true},
	{"two\nlines\n", true},
	{"no final break\nx", true},
	{"empty\n\nline\n", true},
	{"  indented\ninside\n", false},
	{"first\n  indented\n", true},
	{"# comment\n- item\nkey: value\n", true},
	{"\nleading break\n", false},
	{"trailing blank\n\n", false},
	{"space before break \nx\n", false},
	{"x\ntrailing space ", false},
	{"\n", false},
	{"with\ttab\n", false},
}

func TestScalarStylesMatchGoYAML(t *testing.T) {
	for _, c := range styleCases {
		for _, v := range []any{
			map[string]any{"key": c.s},
			&WriteFile{Path: "/p", Content: c.s, Permissions: "0644"},
			&CloudConfig{Users: []any{"default", User{Name: "u", Sudo: c.s}}, WriteFiles: []WriteFile{{Path: "/x", Content: c.s}}},
		} {
			if got := sameAsGoYAML(t, v); got != c.fast {
				t.Errorf("%q in %T: fast path %v, want %v", c.s, v, got, c.fast)
			}
		}
		// one-line strings also as sequence items; literal blocks are
		// left to go-yaml there
		multi := strings.Contains(c.s, "\n")
		if got := sameAsGoYAML(t, map[string]any{"list": []any{"a", c.s}}); got != (c.fast && !multi) {
			t.Errorf("%q in a sequence: fast path %v, want %v", c.s, got, c.fast && !multi)
		}
	}
}

// TestFastYAMLShapes checks the layouts: nesting, omitempty, map key order,
// and what is left to go-yaml.
func TestFastYAMLShapes(t *testing.T) {
	tru, fls := true, false
	cases := []struct {
		name string
		v    any
		fast bool
	}{
		{"cloud-config", &CloudConfig{Hostname: "h", FQDN: "h.example", ManageEtcHosts: &tru, SSHPwauth: &fls,
			Users: []any{"default", User{Name: "a", Groups: []string{"adm", "sudo"}, LockPasswd: true,
				SSHAuthorizedKeys: []string{"ssh-ed25519 AAAA a@b"}}},
			WriteFiles: []WriteFile{{Path: "/etc/motd", Content: "hi\n", Permissions: "0644"}, {Path: "/a", Content: "x", Owner: "u:g", Defer: true}},
			Runcmd:     []any{"echo hi", []string{"ls", "-l"}},
			PowerState: &PowerState{Mode: "poweroff", Delay: "now", Timeout: 30}}, false}, // a list in a list
		{"cloud-config without runcmd", &CloudConfig{Hostname: "h", ManageEtcHosts: &tru,
			Users:      []any{"default", User{Name: "a", LockPasswd: true}},
			RandomSeed: &RandomSeed{Encoding: "b64", Data: "QUJD"},
			PhoneHome:  &PhoneHome{URL: "http://192.0.2.1/", Post: []string{"pub_key_rsa", "instance_id"}, Tries: 3},
			PowerState: &PowerState{Mode: "reboot", Delay: 5, Message: "bye", Condition: true}}, true},
		{"network v1", &NetworkV1{Version: 1, Config: []ConfigV1{
			{Type: "physical", Name: "eth0", MACAddress: "52:54:00:12:34:56", MTU: 1500, AcceptRA: &fls,
				Subnets: []SubnetV1{{Type: "static", Address: "192.0.2.10/24", Gateway: "192.0.2.1"}, {Type: "ipv6_slaac"}}},
			{Type: "nameserver", Address: []string{"192.0.2.53", "2001:db8::53"}, Search: []string{"example.com"}}}}, true},
		{"meta-data", map[string]any{"instance-id": "b39190f6-542e-8ef6-9edd-2d30a98ff35c", "local-hostname": "vm",
			"public-keys": []any{"ssh-ed25519 AAAA a@b"}, "zone": "a", "Ab_c": "x", "a-b": "y", "a_b": "z", "aB": 1, "ab": true}, true},
		{"key order: prefix, non-letters before letters", map[string]any{"ab": 1, "a": 2, "a-": 3, "a_": 4, "aZ": 5, "a.": 6, "b": 7, "B": 8, "_": 9}, true},
		{"key with digits", map[string]any{"k1": "a", "k10": "b", "k2": "c"}, false},
		{"nested map", map[string]any{"outer": map[string]any{"inner": map[string]string{"x": "y"}}}, true},
		{"map in a list in a map", map[string]any{"l": []any{map[string]any{"a": 1, "b": []any{"x", 2}}, "s"}}, true},
		{"uints and negative ints", map[string]any{"u": uint16(7), "i": -3}, true},
		{"empty map value", map[string]any{"e": map[string]any{}}, false},
		{"empty list value", map[string]any{"e": []any{}}, false},
		{"nil value", map[string]any{"n": nil}, false},
		{"float", map[string]any{"f": 1.5}, false},
		{"bytes", map[string]any{"b": []byte("x")}, false},
		{"empty struct", &CloudConfig{}, false},
		{"empty map", map[string]any{}, false},
		{"not a mapping", []string{"a"}, false},
		{"int keys", map[int]string{1: "a"}, false},
		{"key needing quotes", map[string]any{"y": 1}, false},
		{"duration (go-yaml writes 1s)", map[string]any{"d": time.Second}, false},
		{"time", map[string]any{"t": time.Unix(0, 0).UTC()}, false},
		{"text marshaller", map[string]any{"ip": netip.MustParseAddr("192.0.2.1")}, false},
		{"text marshaller in a struct field", &PhoneHome{URL: "u", Post: netip.MustParseAddr("192.0.2.1")}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := sameAsGoYAML(t, c.v); got != c.fast {
				t.Errorf("fast path %v, want %v", got, c.fast)
			}
		})
	}
}

// FuzzFastYAML puts arbitrary strings where the documents have them: as
// values, keys, list items, file contents and addresses.
func FuzzFastYAML(f *testing.F) {
	for _, c := range styleCases {
		f.Add(c.s, "key", c.s+"\n")
	}
	f.Add("a", "Ab-c_d", "x\n\ny")
	f.Fuzz(func(t *testing.T, s, key, content string) {
		sameAsGoYAML(t, map[string]any{key: s, "list": []any{s, content}, "z" + key: map[string]any{key: content}})
		sameAsGoYAML(t, &CloudConfig{Hostname: s, Users: []any{"default", User{Name: s, Sudo: key, Groups: []string{s}}},
			WriteFiles: []WriteFile{{Path: key, Content: content, Owner: s}}})
		sameAsGoYAML(t, &NetworkV1{Version: 1, Config: []ConfigV1{{Type: "physical", Name: key, MACAddress: s,
			Subnets: []SubnetV1{{Type: "static", Address: s, Gateway: content}}}}})
	})
}
