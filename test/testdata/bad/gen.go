//go:build ignore

// gen writes the bad-input corpus: one NAME.json (the raw job bytes) and one
// NAME.expect (what the agent must answer) per case. Run from this directory:
//
//	go run gen.go
//
// NAME.expect is JSON: {"code": result error code, "errors": [[field, code],
// ...] that the failure must include (a field ending in "*" matches by
// prefix; an empty code matches any code), "api": HTTP status of POST /v1/jobs
// (400 rejected, 413 too large, 202 accepted then failed at run time)}.
// The reliability suite (test/reliability) adds cases it must create at run
// time: symlinks in the spool, a FIFO, a document over the size limit.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type expect struct {
	Code   string      `json:"code"`
	Errors [][2]string `json:"errors"`
	API    int         `json:"api"`
}

type tc struct {
	name string
	doc  []byte
	exp  expect
}

var cases []tc

// base is a valid attach job for a domain of the suite's node file.
func base() map[string]any {
	return map[string]any{"version": 1, "domain": "bad-0000", "action": "attach", "hostname": "ok"}
}

func enc(m map[string]any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(m); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// inv: a case rejected at validation (400 / failed invalid_job) with one
// expected field error.
func inv(name string, doc []byte, field, code string) {
	cases = append(cases, tc{name, doc, expect{"invalid_job", [][2]string{{field, code}}, 400}})
}

// with returns base() with keys set (a nil value deletes the key).
func with(kv ...any) []byte {
	m := base()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	return enc(m)
}

// runtime: a case the agent finds only with the host's state (secrets,
// prebuilt images, domains). One it fails invalid_job is refused by POST
// /v1/jobs with 400, since the API makes the engine's check
// (payload.Check resolves the secrets and knows the default format); the
// others are accepted (202), then failed by the engine.
func runtime(name string, doc []byte, code, field, fcode string) {
	e := expect{Code: code, API: 202}
	if code == "invalid_job" {
		e.API = 400
	}
	if field != "" {
		e.Errors = [][2]string{{field, fcode}}
	}
	cases = append(cases, tc{name, doc, e})
}

type obj = map[string]any
type arr = []any

func main() {
	raw := func(s string) []byte { return []byte(s) }
	// --- malformed JSON and non-JSON files
	inv("syntax-empty", raw(""), "", "syntax")
	inv("syntax-whitespace", raw(" \n\t "), "", "syntax")
	inv("syntax-open-brace", raw("{"), "", "syntax")
	inv("syntax-close-brace", raw("}"), "", "syntax")
	inv("syntax-trailing-comma", raw(`{"version":1,"domain":"bad-0000",}`), "", "syntax")
	inv("syntax-single-quotes", raw(`{'version':1}`), "", "syntax")
	inv("syntax-missing-comma", raw(`{"version":1 "domain":"bad-0000"}`), "", "syntax")
	inv("syntax-truncated", raw(`{"version":1,"domain":"bad-0`), "", "syntax")
	inv("syntax-truncated-after-colon", raw(`{"version":`), "", "syntax")
	inv("syntax-two-documents", raw(`{"version":1,"domain":"bad-0000"}{"version":1}`), "", "syntax")
	inv("syntax-comment", raw("// job\n{\"version\":1,\"domain\":\"bad-0000\"}"), "", "syntax")
	inv("syntax-nan", raw(`{"version":NaN,"domain":"bad-0000"}`), "", "syntax")
	inv("syntax-infinity", raw(`{"version":Infinity,"domain":"bad-0000"}`), "", "syntax")
	inv("syntax-hex-number", raw(`{"version":0x1,"domain":"bad-0000"}`), "", "syntax")
	inv("syntax-leading-zero", raw(`{"version":01,"domain":"bad-0000"}`), "", "syntax")
	inv("syntax-bare-word", raw(`hello`), "", "syntax")
	inv("syntax-unquoted-key", raw(`{version:1}`), "", "syntax")
	inv("syntax-bad-escape", raw(`{"version":1,"domain":"bad\q"}`), "", "syntax")
	inv("syntax-raw-newline-in-string", raw("{\"version\":1,\"hostname\":\"a\nb\"}"), "", "syntax")
	inv("syntax-raw-nul", raw("{\"version\":1,\x00\"domain\":\"bad-0000\"}"), "", "syntax")
	inv("syntax-nul-in-string", raw("{\"version\":1,\"domain\":\"bad-\x00\"}"), "", "syntax")
	inv("nonjson-yaml", raw("version: 1\ndomain: bad-0000\n"), "", "syntax")
	inv("nonjson-xml", raw("<job><version>1</version></job>"), "", "syntax")
	inv("nonjson-shell", raw("#!/bin/sh\nrm -rf /\n"), "", "syntax")
	inv("nonjson-png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), "", "encoding")
	inv("nonjson-gzip", []byte{0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3}, "", "encoding")
	inv("nonjson-elf", []byte("\x7fELF\x02\x01\x01\x00"), "", "syntax")
	inv("nonjson-iso-label", raw("CD001 cidata"), "", "syntax")
	inv("toplevel-array", raw(`[{"version":1,"domain":"bad-0000"}]`), "", "type")
	inv("toplevel-null", raw(`null`), "", "type")
	inv("toplevel-string", raw(`"job"`), "", "type")
	inv("toplevel-number", raw(`1`), "", "type")
	inv("empty-object", raw(`{}`), "version", "required")
	// --- encoding
	inv("utf8-invalid-byte-in-value", raw("{\"version\":1,\"domain\":\"bad-0000\",\"hostname\":\"a\xffb\"}"), "", "encoding")
	inv("utf8-invalid-byte-in-key", raw("{\"version\":1,\"dom\xc3ain\":\"bad-0000\"}"), "", "encoding")
	inv("utf8-overlong-slash", raw("{\"version\":1,\"domain\":\"bad-0000\",\"files\":[{\"path\":\"/etc\xc0\xafpasswd\",\"content\":\"x\"}]}"), "", "encoding")
	inv("utf8-surrogate-bytes", raw("{\"version\":1,\"domain\":\"bad-0000\",\"hostname\":\"\xed\xa0\x80\"}"), "", "encoding")
	inv("utf8-truncated-sequence", raw("{\"version\":1,\"domain\":\"bad-0000\",\"hostname\":\"\xe2\x82\"}"), "", "encoding")
	inv("utf8-latin1-document", raw("{\"version\":1,\"domain\":\"bad-0000\",\"hostname\":\"caf\xe9\"}"), "", "encoding")
	inv("utf16le-with-bom", []byte("\xff\xfe{\x00}\x00"), "", "encoding")
	inv("utf8-bom", raw("\xef\xbb\xbf{\"version\":1,\"domain\":\"bad-0000\"}"), "", "syntax")
	// --- NUL bytes and control characters in values (escaped, valid JSON)
	inv("nul-in-hostname", with("hostname", "ok\x00evil"), "hostname", "invalid")
	inv("nul-in-domain", with("domain", "bad-0000\x00"), "domain", "invalid")
	inv("nul-in-runcmd-shell", with("runcmd", arr{"echo a\x00b"}), "runcmd[0]", "invalid")
	inv("nul-in-runcmd-argv", with("runcmd", arr{arr{"echo", "a\x00"}}), "runcmd[0][1]", "invalid")
	inv("nul-in-file-path", with("files", arr{obj{"path": "/etc/x\x00y", "content": "x"}}), "files[0].path", "invalid")
	inv("nul-in-secret-name", with("user_data_secret", "a\x00b"), "user_data_secret", "invalid")
	inv("nul-in-instance-id", with("instance_id", "i-\x00"), "instance_id", "invalid")
	inv("newline-in-domain", with("domain", "bad\n0000"), "domain", "invalid")
	inv("control-in-meta-key", with("meta_data", obj{"a\x01b": "x"}), "meta_data.a\x01b", "invalid")
	inv("empty-meta-key", with("meta_data", obj{"": "x"}), "meta_data.", "invalid")
	// --- wrong types
	inv("type-version-string", with("version", "1"), "version", "type")
	inv("type-version-float", with("version", 1.5), "version", "type")
	inv("type-version-bool", with("version", true), "version", "type")
	inv("type-version-object", with("version", obj{}), "version", "type")
	inv("type-domain-number", with("domain", 5), "domain", "type")
	inv("type-action-number", with("action", 1), "action", "type")
	inv("type-hostname-array", with("hostname", arr{"a"}), "hostname", "type")
	inv("type-users-object", with("users", obj{"name": "a"}), "users", "type")
	inv("type-users-item-number", with("users", arr{1}), "users[0]", "type")
	inv("type-user-name-number", with("users", arr{obj{"name": 7}}), "users[0].name", "type")
	inv("type-user-groups-string", with("users", arr{obj{"name": "a", "groups": "wheel"}}), "users[0].groups", "type")
	inv("type-lock-password-int", with("users", arr{obj{"name": "a", "lock_password": 1}}), "users[0].lock_password", "type")
	inv("type-nics-string", with("nics", "eth0"), "nics", "type")
	inv("type-nic-mac-number", with("nics", arr{obj{"mac": 1}}), "nics[0].mac", "type")
	inv("type-mtu-string", with("nics", arr{obj{"mac": "52:54:00:00:00:01", "mtu": "1500"}}), "nics[0].mtu", "type")
	inv("type-ipv4-string", with("nics", arr{obj{"mac": "52:54:00:00:00:01", "ipv4": "dhcp"}}), "nics[0].ipv4", "type")
	inv("type-runcmd-item-number", with("runcmd", arr{1}), "runcmd[0]", "type")
	inv("type-runcmd-argv-number", with("runcmd", arr{arr{"echo", 1}}), "runcmd[0][1]", "type")
	inv("type-runcmd-object", with("runcmd", arr{obj{"cmd": "x"}}), "runcmd[0]", "type")
	inv("type-keys-string", with("ssh_authorized_keys", "ssh-ed25519 AAAA"), "ssh_authorized_keys", "type")
	inv("type-dns-array", with("dns", arr{"1.1.1.1"}), "dns", "type")
	inv("type-files-object", with("files", obj{"path": "/x"}), "files", "type")
	inv("type-file-content-number", with("files", arr{obj{"path": "/x", "content": 1}}), "files[0].content", "type")
	inv("type-meta-data-array", with("meta_data", arr{"a"}), "meta_data", "type")
	inv("type-regen-keys-string", with("regenerate_ssh_host_keys", "yes"), "regenerate_ssh_host_keys", "type")
	inv("type-ssh-pwauth-null-string", with("ssh_password_auth", "false"), "ssh_password_auth", "type")
	inv("type-user-data-object", with("user_data", obj{"runcmd": arr{}}), "user_data", "type")
	inv("type-network-config-object", with("network_config", obj{"version": 1}), "network_config", "type")
	// --- unknown keys and duplicate keys
	inv("unknown-top-typo", with("hostnme", "x"), "hostnme", "unknown_field")
	inv("unknown-top-case", raw(`{"Version":1,"domain":"bad-0000"}`), "Version", "unknown_field")
	inv("unknown-proto", with("__proto__", obj{}), "__proto__", "unknown_field")
	inv("unknown-user-passwd", with("users", arr{obj{"name": "a", "passwd": "x"}}), "users[0].passwd", "unknown_field")
	inv("unknown-nic-ip", with("nics", arr{obj{"mac": "52:54:00:00:00:01", "ip": "10.0.0.2"}}), "nics[0].ip", "unknown_field")
	inv("unknown-dns-servers", with("dns", obj{"servers": arr{"1.1.1.1"}}), "dns.servers", "unknown_field")
	inv("unknown-file-mode", with("files", arr{obj{"path": "/x", "content": "x", "mode": "0644"}}), "files[0].mode", "unknown_field")
	inv("unknown-ipv4-netmask", with("nics", arr{obj{"mac": "52:54:00:00:00:01", "ipv4": obj{"method": "static", "address": "10.0.0.2/24", "netmask": "255.255.255.0"}}}), "nics[0].ipv4.netmask", "unknown_field")
	inv("duplicate-version", raw(`{"version":1,"version":1,"domain":"bad-0000"}`), "version", "duplicate_key")
	inv("duplicate-hostname", raw(`{"version":1,"domain":"bad-0000","hostname":"a","hostname":"b"}`), "hostname", "duplicate_key")
	inv("duplicate-user-name", raw(`{"version":1,"domain":"bad-0000","users":[{"name":"a","name":"b"}]}`), "users[0].name", "duplicate_key")
	inv("duplicate-domain-case-variant", raw(`{"version":1,"domain":"bad-0000","domain":"bad-0001"}`), "domain", "duplicate_key")
	// --- versions and ranges
	inv("version-missing", with("version", nil), "version", "required")
	inv("version-zero", with("version", 0), "version", "required")
	inv("version-two", with("version", 2), "version", "unsupported")
	inv("version-negative", with("version", -1), "version", "unsupported")
	inv("version-huge", raw(`{"version":99999999999999999999,"domain":"bad-0000"}`), "version", "out_of_range")
	inv("version-exponent", raw(`{"version":1e300,"domain":"bad-0000"}`), "version", "type")
	inv("mtu-too-big", with("nics", arr{obj{"mac": "52:54:00:00:00:01", "mtu": 70000}}), "nics[0].mtu", "out_of_range")
	inv("mtu-negative", with("nics", arr{obj{"mac": "52:54:00:00:00:01", "mtu": -1}}), "nics[0].mtu", "out_of_range")
	inv("mtu-too-small", with("nics", arr{obj{"mac": "52:54:00:00:00:01", "mtu": 10}}), "nics[0].mtu", "out_of_range")
	// --- enumerations and ids
	inv("action-unknown", with("action", "destroy"), "action", "invalid")
	inv("format-unknown", with("format", "cfgdrive"), "format", "invalid")
	inv("media-unknown", with("media", "qcow2"), "media", "invalid")
	inv("user-data-mode-unknown", with("user_data_mode", "append"), "user_data_mode", "invalid")
	inv("id-traversal", with("id", "../../etc/passwd"), "id", "invalid")
	inv("id-leading-dash", with("id", "-rf"), "id", "invalid")
	inv("id-too-long", with("id", strings.Repeat("a", 129)), "id", "invalid")
	inv("id-slash", with("id", "a/b"), "id", "invalid")
	inv("domain-slash", with("domain", "a/b"), "domain", "invalid")
	inv("domain-too-long", with("domain", strings.Repeat("d", 256)), "domain", "invalid")
	inv("domain-leading-space", with("domain", " bad-0000"), "domain", "invalid")
	inv("instance-id-slash", with("instance_id", "i/1"), "instance_id", "invalid")
	inv("instance-id-backslash", with("instance_id", `i\1`), "instance_id", "invalid")
	inv("instance-id-space", with("instance_id", " i-1"), "instance_id", "invalid")
	inv("instance-id-too-long", with("instance_id", strings.Repeat("i", 300)), "instance_id", "invalid")
	// --- host names
	for i, h := range []string{"-bad", "bad-", "a..b", "has space", "under_score", strings.Repeat("l", 64), strings.Repeat("a.", 127) + "ab",
		"ünïcode", "a/b", ".leading", "trailing..", "a;reboot", "$(id)", "a\tb"} {
		inv(fmt.Sprintf("hostname-%02d", i), with("hostname", h), "hostname", "invalid")
	}
	// --- time zones
	for i, tz := range []string{"Mars/Olympus", "../../etc/passwd", "UTC+25", "America/New York", "/etc/localtime", "Europe/", "Europe/../../../etc/shadow"} {
		inv(fmt.Sprintf("timezone-%02d", i), with("timezone", tz), "timezone", "")
	}
	// --- NICs: MACs, addresses, prefixes, gateways, methods
	nic := func(n obj) []byte {
		if _, ok := n["mac"]; !ok {
			n["mac"] = "52:54:00:00:00:01"
		}
		return with("nics", arr{n})
	}
	for i, m := range []string{"00:11:22:33:44", "zz:11:22:33:44:55", "00:11:22:33:44:55:66", "0011.2233.4455x", "", "00:11:22:33:44:5", "g0:00:00:00:00:00"} {
		code := "invalid"
		if m == "" {
			code = "required"
		}
		inv(fmt.Sprintf("mac-%02d", i), nic(obj{"mac": m}), "nics[0].mac", code)
	}
	inv("mac-duplicate", with("nics", arr{obj{"mac": "52:54:00:00:00:01"}, obj{"mac": "52:54:00:00:00:01"}}), "nics[1].mac", "duplicate")
	inv("mac-duplicate-case", with("nics", arr{obj{"mac": "52:54:00:aa:00:01"}, obj{"mac": "52:54:00:AA:00:01"}}), "nics[1].mac", "duplicate")
	st4 := func(addr, gw string) obj {
		o := obj{"method": "static", "address": addr}
		if gw != "" {
			o["gateway"] = gw
		}
		return o
	}
	for i, c := range []struct{ addr, gw, field string }{
		{"300.1.1.1/24", "", "nics[0].ipv4.address"},
		{"10.0.0.1/33", "", "nics[0].ipv4.address"},
		{"10.0.0.1", "", "nics[0].ipv4.address"},
		{"fe80::1/64", "", "nics[0].ipv4.address"},
		{"10.0.0.2/24", "10.0.0.300", "nics[0].ipv4.gateway"},
		{"10.0.0.2/24", "fe80::1", "nics[0].ipv4.gateway"},
		{"10.0.0.2/24", "not-an-ip", "nics[0].ipv4.gateway"},
		{"10.0.0.1.5/24", "", "nics[0].ipv4.address"},
		{"10.0.0.2/-1", "", "nics[0].ipv4.address"},
		{"10.0.0.2/24/8", "", "nics[0].ipv4.address"},
		{" 10.0.0.2/24", "", "nics[0].ipv4.address"},
		{"010.000.000.002/24", "", "nics[0].ipv4.address"},
	} {
		inv(fmt.Sprintf("ipv4-%02d", i), nic(obj{"ipv4": st4(c.addr, c.gw)}), c.field, "")
	}
	inv("ipv4-static-no-address", nic(obj{"ipv4": obj{"method": "static"}}), "nics[0].ipv4.address", "required")
	inv("ipv4-method-unknown", nic(obj{"ipv4": obj{"method": "bootp"}}), "nics[0].ipv4.method", "invalid")
	inv("ipv4-method-missing", nic(obj{"ipv4": obj{"address": "10.0.0.2/24"}}), "nics[0].ipv4.method", "required")
	for i, c := range []struct{ addr, gw, field string }{
		{"2001:db8::zz/64", "", "nics[0].ipv6.address"},
		{"10.0.0.1/24", "", "nics[0].ipv6.address"},
		{"2001:db8::1/129", "", "nics[0].ipv6.address"},
		{"2001:db8::1", "", "nics[0].ipv6.address"},
		{"2001:db8::2/64", "10.0.0.1", "nics[0].ipv6.gateway"},
		{"2001:db8:::1/64", "", "nics[0].ipv6.address"},
	} {
		inv(fmt.Sprintf("ipv6-%02d", i), nic(obj{"ipv6": st4(c.addr, c.gw)}), c.field, "")
	}
	dnsJob := func(d obj) []byte {
		return with("nics", arr{obj{"mac": "52:54:00:00:00:01", "ipv4": st4("10.0.0.2/24", "10.0.0.1")}}, "dns", d)
	}
	for i, ns := range []string{"999.0.0.1", "localhost", "10.0.0.1/24", "", "1.1.1.1:53"} {
		inv(fmt.Sprintf("dns-nameserver-%02d", i), dnsJob(obj{"nameservers": arr{ns}}), "dns.nameservers[0]", "")
	}
	for i, s := range []string{"bad domain", "-x.example", "a..b", ""} {
		inv(fmt.Sprintf("dns-search-%02d", i), dnsJob(obj{"search": arr{s}}), "dns.search[0]", "")
	}
	// --- files: path traversal and friends
	file := func(f obj) []byte {
		if _, ok := f["content"]; !ok {
			f["content"] = "x"
		}
		return with("files", arr{f})
	}
	for i, p := range []string{"relative/path", "../etc/passwd", "/etc/../../root/.ssh/authorized_keys", "/etc/./passwd", "//etc/passwd", "/etc/", "/", "/etc/x/..", "..", "~/x", "/a\nb"} {
		inv(fmt.Sprintf("file-path-%02d", i), file(obj{"path": p}), "files[0].path", "invalid")
	}
	inv("file-path-empty", file(obj{"path": ""}), "files[0].path", "required")
	inv("file-path-duplicate", with("files", arr{obj{"path": "/etc/x", "content": "a"}, obj{"path": "/etc/x", "content": "b"}}), "files[1].path", "duplicate")
	inv("file-encoding-unknown", file(obj{"path": "/etc/x", "encoding": "gzip"}), "files[0].encoding", "invalid")
	inv("file-base64-bad", file(obj{"path": "/etc/x", "encoding": "base64", "content": "!!!"}), "files[0].content", "invalid")
	inv("file-permissions-bad", file(obj{"path": "/etc/x", "permissions": "999"}), "files[0].permissions", "invalid")
	inv("file-permissions-word", file(obj{"path": "/etc/x", "permissions": "rwxr-xr-x"}), "files[0].permissions", "invalid")
	// --- users
	u := func(o obj) []byte { return with("users", arr{o}) }
	inv("user-name-missing", u(obj{"sudo": "ALL=(ALL) ALL"}), "users[0].name", "required")
	inv("user-name-space", u(obj{"name": "bad name"}), "users[0].name", "invalid")
	inv("user-name-dash", u(obj{"name": "-x"}), "users[0].name", "invalid")
	inv("user-name-traversal", u(obj{"name": "../root"}), "users[0].name", "invalid")
	inv("user-duplicate", with("users", arr{obj{"name": "a"}, obj{"name": "a"}}), "users[1].name", "duplicate")
	inv("user-password-and-hash", u(obj{"name": "a", "password": "p", "password_hash": "$6$abc$def"}), "users[0]", "conflict")
	inv("user-password-and-secret", u(obj{"name": "a", "password": "p", "password_secret": "pw"}), "users[0]", "conflict")
	inv("user-hash-plaintext", u(obj{"name": "a", "password_hash": "hunter2"}), "users[0].password_hash", "invalid")
	inv("user-shell-relative", u(obj{"name": "a", "shell": "bash"}), "users[0].shell", "invalid")
	inv("user-sudo-newline", u(obj{"name": "a", "sudo": "ALL=(ALL) ALL\nroot ALL=(ALL) ALL"}), "users[0].sudo", "invalid")
	inv("user-key-garbage", u(obj{"name": "a", "ssh_authorized_keys": arr{"not-a-key"}}), "users[0].ssh_authorized_keys[0]", "invalid")
	inv("ssh-key-garbage", with("ssh_authorized_keys", arr{"ssh-rsa"}), "ssh_authorized_keys[0]", "invalid")
	inv("ssh-key-newline", with("ssh_authorized_keys", arr{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA x\nssh-rsa AAAA y"}), "ssh_authorized_keys[0]", "invalid")
	// --- secrets: names that would leave the secrets directory
	for i, n := range []string{"../x", "/etc/passwd", "a/b", ".hidden", "..", "./pw", "pw/", `..\x`} {
		inv(fmt.Sprintf("password-secret-%02d", i), u(obj{"name": "a", "password_secret": n}), "users[0].password_secret", "invalid")
		inv(fmt.Sprintf("user-data-secret-%02d", i), with("user_data_secret", n), "user_data_secret", "invalid")
	}
	// secrets that the suite creates in the secrets directory: resolved at run time
	runtime("secret-missing", u(obj{"name": "a", "password_secret": "no-such-secret"}), "invalid_job", "users[0].password_secret", "not_found")
	runtime("secret-symlink-out", u(obj{"name": "a", "password_secret": "link-out"}), "invalid_job", "users[0].password_secret", "invalid")
	runtime("secret-symlink-dir", with("user_data_secret", "link-dir"), "invalid_job", "user_data_secret", "invalid")
	runtime("secret-symlink-user-data", with("user_data_secret", "link-out"), "invalid_job", "user_data_secret", "invalid")
	runtime("secret-directory", u(obj{"name": "a", "password_secret": "a-dir"}), "invalid_job", "users[0].password_secret", "invalid")

	// --- root, host keys, locale, power state, phone home, random seed, network_data (issue 12)
	hostKey := func(n string) []byte {
		return with("ssh_host_keys", arr{obj{"type": "ed25519", "private_key_secret": n}})
	}
	for i, n := range []string{"../x", "/etc/ssh/ssh_host_ed25519_key", ".hidden", "a/b"} {
		inv(fmt.Sprintf("host-key-secret-%02d", i), hostKey(n), "ssh_host_keys[0].private_key_secret", "invalid")
	}
	runtime("host-key-secret-missing", hostKey("no-such-secret"), "invalid_job", "ssh_host_keys[0].private_key_secret", "not_found")
	runtime("host-key-secret-symlink-out", hostKey("link-out"), "invalid_job", "ssh_host_keys[0].private_key_secret", "invalid")
	runtime("host-key-secret-directory", hostKey("a-dir"), "invalid_job", "ssh_host_keys[0].private_key_secret", "invalid")
	inv("host-key-inline-private", with("ssh_host_keys", arr{obj{"type": "ed25519", "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----"}}), "ssh_host_keys[0].private_key", "unknown_field")
	inv("host-key-type-dsa", with("ssh_host_keys", arr{obj{"type": "dsa", "private_key_secret": "k"}}), "ssh_host_keys[0].type", "invalid")
	inv("root-groups", u(obj{"name": "root", "groups": arr{"adm"}}), "users[0].groups", "invalid")
	inv("root-shell", u(obj{"name": "root", "shell": "/bin/zsh"}), "users[0].shell", "invalid")
	inv("locale-injection", with("locale", "C.UTF-8\nLC_ALL=x"), "locale", "invalid")
	inv("locale-path", with("locale", "../../etc/shadow"), "locale", "invalid")
	inv("power-state-mode", with("power_state", obj{"mode": "halt-and-catch-fire"}), "power_state.mode", "invalid")
	inv("power-state-delay-string", with("power_state", obj{"mode": "reboot", "delay_minutes": "+5"}), "power_state.delay_minutes", "type")
	inv("power-state-condition-bool", with("power_state", obj{"mode": "reboot", "condition": true}), "power_state.condition", "type")
	inv("phone-home-file-url", with("phone_home", obj{"url": "file:///etc/shadow"}), "phone_home.url", "invalid")
	inv("phone-home-post-unknown", with("phone_home", obj{"url": "http://h/", "post": arr{"password"}}), "phone_home.post[0]", "invalid")
	inv("random-seed-not-base64", with("random_seed", obj{"data": "not base64!"}), "random_seed.data", "invalid")
	inv("random-seed-generate-huge", with("random_seed", obj{"generate_bytes": 1 << 30}), "random_seed.generate_bytes", "out_of_range")
	inv("random-seed-both", with("random_seed", obj{"data": b64("0123456789abcdef"), "generate_bytes": 16}), "random_seed", "conflict")
	inv("network-data-nocloud", with("format", "nocloud", "network_data", obj{"links": arr{obj{"id": "l0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}}}), "network_data", "conflict")
	inv("network-data-link-unnamed", with("format", "configdrive", "network_data", obj{"links": arr{obj{"id": "l0", "type": "phy"}}}), "network_data.links[0]", "required")
	runtime("network-config-configdrive", with("format", "configdrive", "network_config", "version: 2\nethernets: {}\n"), "invalid_job", "network_config", "conflict")
	runtime("network-data-default-format", with("network_data", obj{"links": arr{obj{"id": "l0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}}}), "invalid_job", "network_data", "conflict")
	runtime("secret-fifo", u(obj{"name": "a", "password_secret": "a-fifo"}), "invalid_job", "users[0].password_secret", "invalid")
	runtime("secret-empty-password", u(obj{"name": "a", "password_secret": "empty"}), "invalid_job", "users[0].password_secret", "invalid")
	runtime("secret-too-big", with("user_data_secret", "big"), "invalid_job", "user_data_secret", "too_large")
	runtime("secret-bad-yaml", with("user_data_secret", "bad-yaml"), "invalid_job", "user_data_secret", "invalid")
	// --- user-data, network-config, vendor-data
	bomb := "#cloud-config\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		bomb += fmt.Sprintf("%s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n", n, n, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = n
	}
	inv("yaml-bomb-user-data", with("user_data", bomb), "user_data", "invalid")
	inv("yaml-bomb-network-config", with("network_config", "version: 1\n"+strings.TrimPrefix(bomb, "#cloud-config\n")), "network_config", "invalid")
	inv("yaml-bomb-vendor-data", with("vendor_data", bomb), "vendor_data", "invalid")
	inv("yaml-bomb-user-data-base64", with("user_data_base64", b64(bomb)), "user_data_base64", "invalid")
	inv("yaml-alias-cycle", with("user_data", "#cloud-config\na: &a [*a]\n"), "user_data", "invalid")
	inv("yaml-undefined-alias", with("user_data", "#cloud-config\na: *nope\n"), "user_data", "invalid")
	inv("yaml-tab-indent", with("user_data", "#cloud-config\na:\n\t- b\n"), "user_data", "invalid")
	inv("yaml-not-a-map", with("user_data", "#cloud-config\n- a\n- b\n"), "user_data", "invalid")
	inv("yaml-unclosed-flow", with("user_data", "#cloud-config\na: [1, 2\n"), "user_data", "invalid")
	// a repeated key is fine: cloud-init's PyYAML keeps the last value (issue 18)
	inv("yaml-deep-nesting", with("user_data", "#cloud-config\na: "+strings.Repeat("[", 20000)+strings.Repeat("]", 20000)+"\n"), "user_data", "invalid")
	inv("user-data-and-base64", with("user_data", "#cloud-config\n{}\n", "user_data_base64", b64("#cloud-config\n{}\n")), "user_data", "conflict")
	inv("user-data-base64-bad", with("user_data_base64", "!!!not base64"), "user_data_base64", "invalid")
	inv("user-data-replace-without-data", with("user_data_mode", "replace"), "user_data_mode", "conflict")
	inv("multipart-bad-boundary", with("user_data", "Content-Type: multipart/mixed; boundary=\"\"\nMIME-Version: 1.0\n\n--x\n"), "user_data", "invalid")
	inv("multipart-no-parts", with("user_data", "Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n"), "user_data", "invalid")
	inv("multipart-unterminated-part", with("user_data", "Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/x-shellscript\n\n#!/bin/sh\n"), "user_data", "invalid")
	var gzBomb bytes.Buffer
	zw := gzip.NewWriter(&gzBomb)
	zw.Write([]byte("#cloud-config\n#"))
	zw.Write(bytes.Repeat([]byte("A"), 17<<20))
	zw.Close()
	inv("gzip-bomb-user-data", with("user_data_base64", base64.StdEncoding.EncodeToString(gzBomb.Bytes())), "user_data_base64", "too_large")
	inv("gzip-broken-vendor-data", with("vendor_data_base64", base64.StdEncoding.EncodeToString([]byte{0x1f, 0x8b, 8, 0})), "vendor_data_base64", "invalid")
	inv("user-data-runcmd-not-a-list", with("runcmd", arr{"echo job"}, "user_data", "#cloud-config\nruncmd: echo user\n"), "user_data", "conflict")
	inv("meta-data-two-instance-ids", with("meta_data", obj{"instance-id": "a", "uuid": "b"}), "meta_data.uuid", "conflict")
	inv("network-config-wrapper-and-more", with("network_config", "network:\n  version: 2\nextra: 1\n"), "network_config", "invalid")
	inv("network-config-version-3", with("network_config", "version: 3\n"), "network_config.version", "unsupported")
	inv("network-config-not-yaml", with("network_config", "version: [1\n"), "network_config", "invalid")
	inv("network-config-list", with("network_config", "- version: 1\n"), "network_config", "invalid")
	inv("network-config-with-nics", with("network_config", "version: 1\nconfig: []\n", "nics", arr{obj{"mac": "52:54:00:00:00:01", "ipv4": obj{"method": "dhcp"}}}), "network_config", "conflict")
	inv("vendor-data-bad-yaml", with("vendor_data", "#cloud-config\na: [\n"), "vendor_data", "invalid")
	// --- deep nesting of the JSON document itself
	deep := func(n int) obj {
		var v any = "x"
		for i := 0; i < n; i++ {
			v = obj{"k": v}
		}
		return v.(obj)
	}
	inv("json-deep-meta-data", with("meta_data", deep(40)), "meta_data*", "too_deep")
	inv("json-deep-arrays", raw(`{"version":1,"domain":"bad-0000","meta_data":{"a":`+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+`}}`), "meta_data*", "too_deep")
	inv("json-deep-unclosed", raw(`{"version":1,"meta_data":{"a":`+strings.Repeat("[", 50000)), "meta_data*", "too_deep")
	// --- domain_xml and prebuilt_image
	inv("domain-xml-not-xml", with("domain_xml", "<domain"), "domain_xml", "invalid")
	inv("domain-xml-name-mismatch", with("domain", "bad-9999", "domain_xml", "<domain type='test'><name>other</name><memory>65536</memory><os><type>hvm</type></os></domain>"), "domain_xml", "")
	inv("domain-xml-entity-bomb", with("domain", "bad-9999", "domain_xml", `<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><domain type='test'><name>bad-9999</name><description>&b;</description></domain>`), "domain_xml", "invalid")
	inv("prebuilt-relative", with("hostname", nil, "prebuilt_image", "seed.iso"), "prebuilt_image", "invalid")
	inv("prebuilt-with-content", with("prebuilt_image", "/var/lib/seed.iso"), "prebuilt_image", "conflict")
	inv("prebuilt-traversal", with("hostname", nil, "prebuilt_image", "/var/lib/../../etc/shadow"), "prebuilt_image", "invalid")
	runtime("prebuilt-missing", with("hostname", nil, "prebuilt_image", "/nonexistent/vmpayload-seed.iso"), "prebuilt_image", "", "")
	runtime("prebuilt-not-an-image", with("hostname", nil, "prebuilt_image", "/etc/hostname"), "prebuilt_image", "", "")
	runtime("prebuilt-directory", with("hostname", nil, "prebuilt_image", "/etc"), "prebuilt_image", "", "")
	// --- runtime failures: domains that do not exist
	runtime("domain-unknown-name", with("domain", "no-such-domain"), "domain_not_found", "", "")
	runtime("domain-unknown-uuid", with("domain", "0d0e0a0d-0000-4000-8000-000000000000"), "domain_not_found", "", "")
	runtime("domain-unknown-detach", with("domain", "no-such-domain", "action", "detach", "hostname", nil), "domain_not_found", "", "")
	runtime("domain-unknown-start", with("domain", "no-such-domain", "action", "start"), "domain_not_found", "", "")
	runtime("domain-bad-xml-define", with("domain", "bad-new", "domain_xml", "<domain type='kvm'><name>bad-new</name></domain>"), "define_failed", "", "")

	dir := "."
	old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	olde, _ := filepath.Glob(filepath.Join(dir, "*.expect"))
	for _, f := range append(old, olde...) {
		os.Remove(f)
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			panic("duplicate case " + c.name)
		}
		seen[c.name] = true
		if err := os.WriteFile(filepath.Join(dir, c.name+".json"), c.doc, 0o644); err != nil {
			panic(err)
		}
		b, _ := json.Marshal(c.exp)
		if err := os.WriteFile(filepath.Join(dir, c.name+".expect"), append(b, '\n'), 0o644); err != nil {
			panic(err)
		}
	}
	fmt.Printf("%d cases\n", len(cases))
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
