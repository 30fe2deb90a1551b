package job

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/test/testenv"
)

const (
	mac1 = "52:54:00:12:34:56"
	mac2 = "52:54:00:12:34:57"
)

// v1 wraps object members in a version 1 job document.
func v1(members string) string {
	if members == "" {
		return `{"version":1}`
	}
	return `{"version":1,` + members + `}`
}

// nic1 is a job with one DHCP NIC plus extra members.
func nic1(extra string) string {
	doc := `"nics":[{"mac":"` + mac1 + `","ipv4":{"method":"dhcp"}}]`
	if extra != "" {
		doc += "," + extra
	}
	return v1(doc)
}

// ipv4 is a job whose single NIC has the given ipv4 object.
func ipv4(obj string) string {
	return v1(`"nics":[{"mac":"` + mac1 + `","ipv4":` + obj + `}]`)
}

func ipv6(obj string) string {
	return v1(`"nics":[{"mac":"` + mac1 + `","ipv6":` + obj + `}]`)
}

func jstr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// aliasBomb is a billion-laughs YAML document: fully expanded it would hold
// 9^9 strings.
func aliasBomb(header string) string {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString(`a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		refs := strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ",")
		fmt.Fprintf(&b, "%s: &%s [%s]\n", n, n, refs)
		prev = n
	}
	return b.String()
}

type badCase struct {
	name string
	doc  string
	// want lists every expected problem as "field|code", in any order.
	want []string
	// msg, when set, must appear in the message of the first expected problem.
	msg string
	// noQuote turns off the check that messages quote the offending value
	// (for values that must not be echoed or that are quoted in another form).
	noQuote bool
}

func badCases() []badCase {
	deepObj := `{"version":1,"meta_data":` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 41) + `}`
	deepArr := `{"version":1,"runcmd":` + strings.Repeat(`[`, 40) + strings.Repeat(`]`, 40) + `}`
	huge := v1(`"vendor_data":` + jstr("#cloud-config\n# "+strings.Repeat("x", MaxJobBytes)))
	return []badCase{
		// the document as a whole
		{name: "empty", doc: "", want: []string{"|syntax"}, msg: "empty"},
		{name: "blank", doc: " \n\t ", want: []string{"|syntax"}},
		{name: "missing value", doc: `{"version": }`, want: []string{"|syntax"}, msg: "line 1, column 13"},
		{name: "syntax on line 3", doc: "{\n \"version\": 1,\n \"id\": x}", want: []string{"|syntax"}, msg: "invalid character 'x' looking for beginning of value at line 3, column 8"},
		{name: "syntax column counts characters", doc: "{\"hostname\": \"é\" \"x\"}", want: []string{"|syntax"}, msg: "line 1, column 18"},
		{name: "trailing comma", doc: `{"version":1,}`, want: []string{"|syntax"}, msg: "line 1, column 14"},
		{name: "truncated", doc: "{\"version\":1,\n\"users\":[", want: []string{"|syntax"}, msg: "unexpected end of JSON input at line 2, column 10"},
		{name: "trailing data", doc: `{"version":1} {}`, want: []string{"|syntax"}, msg: "after the job object at line 1, column 15"},
		{name: "single quotes", doc: `{'version':1}`, want: []string{"|syntax"}, msg: "line 1, column 2"},
		{name: "top-level array", doc: `[{"version":1}]`, want: []string{"|type"}, msg: "an array"},
		{name: "top-level string", doc: `"job"`, want: []string{"|type"}, msg: `string "job"`},
		{name: "top-level null", doc: `null`, want: []string{"|type"}, msg: "null"},
		{name: "invalid UTF-8", doc: "{\"version\":1,\n\"hostname\":\"h\xffx\"}", want: []string{"|encoding"}, msg: "line 2, column 14"},
		{name: "raw NUL byte in a string", doc: "{\"version\":1,\"hostname\":\"a\x00b\"}", want: []string{"|syntax"}, msg: `'\x00' in string literal at line 1, column 27`},
		{name: "raw NUL byte between tokens", doc: "{\"version\":1,\x00}", want: []string{"|syntax"}},
		{name: "escaped NUL in hostname", doc: v1(`"hostname":"a\u0000b"`), want: []string{"hostname|invalid"}},
		{name: "deep object nesting", doc: deepObj, want: []string{"meta_data" + strings.Repeat(".a", 31) + "|too_deep"}, msg: "deeper than 32"},
		{name: "deep array nesting", doc: deepArr, want: []string{"runcmd" + strings.Repeat("[0]", 31) + "|too_deep"}},
		{name: "document over 1 MiB", doc: huge, want: []string{"|too_large"}, msg: strconv.Itoa(len(huge))},

		// version
		{name: "version missing", doc: `{}`, want: []string{"version|required"}},
		{name: "version null", doc: `{"version":null}`, want: []string{"version|required"}},
		{name: "version 2", doc: `{"version":2}`, want: []string{"version|unsupported"}},
		{name: "version string", doc: `{"version":"1"}`, want: []string{"version|type"}, msg: `string "1"`},
		{name: "version fraction", doc: `{"version":1.5}`, want: []string{"version|type"}},
		{name: "version huge", doc: `{"version":99999999999999999999}`, want: []string{"version|out_of_range"}},
		{name: "version array", doc: `{"version":[1]}`, want: []string{"version|type"}, msg: "an array"},
		{name: "version object", doc: `{"version":{}}`, want: []string{"version|type"}, msg: "an object"},

		// unknown keys at every level
		{name: "unknown top-level key", doc: v1(`"hostnmae":"x"`), want: []string{"hostnmae|unknown_field"}},
		{name: "unknown key is case-sensitive", doc: v1(`"Hostname":"x"`), want: []string{"Hostname|unknown_field"}},
		{name: "unknown user key", doc: v1(`"users":[{"name":"alice","passwd":"x"}]`), want: []string{"users[0].passwd|unknown_field"}},
		{name: "unknown dns key", doc: nic1(`"dns":{"servers":["192.0.2.1"]}`), want: []string{"dns.servers|unknown_field"}},
		{name: "unknown nic key", doc: v1(`"nics":[{"mac":"` + mac1 + `","type":"virtio"}]`), want: []string{"nics[0].type|unknown_field"}},
		{name: "unknown ipv4 key", doc: ipv4(`{"method":"static","address":"192.0.2.10/24","netmask":"255.255.255.0"}`), want: []string{"nics[0].ipv4.netmask|unknown_field"}},
		{name: "unknown ipv6 key", doc: ipv6(`{"method":"slaac","privacy":true}`), want: []string{"nics[0].ipv6.privacy|unknown_field"}},
		{name: "unknown file key", doc: v1(`"files":[{"path":"/etc/motd","content":"hi","mode":"0644"}]`), want: []string{"files[0].mode|unknown_field"}},

		// duplicate keys
		{name: "duplicate top-level key", doc: `{"version":1,"version":1}`, want: []string{"version|duplicate_key"}, msg: "again at line 1, column 14"},
		{name: "duplicate nested key", doc: v1(`"nics":[{"mac":"` + mac1 + `",` + "\n" + `"mac":"` + mac2 + `"}]`), want: []string{"nics[0].mac|duplicate_key"}, msg: "line 2, column 1"},
		{name: "duplicate meta_data key", doc: v1(`"meta_data":{"a":1,"a":2}`), want: []string{"meta_data.a|duplicate_key"}},
		{name: "duplicate keys are all reported", doc: `{"version":1,"id":"a","id":"b","hostname":"h","hostname":"h"}`, want: []string{"id|duplicate_key", "hostname|duplicate_key"}},

		// wrong JSON types
		{name: "hostname number", doc: v1(`"hostname":5`), want: []string{"hostname|type"}, msg: "expected a string, got number 5"},
		{name: "hostname boolean", doc: v1(`"hostname":true`), want: []string{"hostname|type"}, msg: "boolean true"},
		{name: "users string", doc: v1(`"users":"alice"`), want: []string{"users|type"}, msg: "expected an array"},
		{name: "user element wrong types do not cascade", doc: v1(`"users":["alice",null,{"name":"bob"}]`), want: []string{"users[0]|type", "users[1]|type"}},
		{name: "dns array", doc: nic1(`"dns":["192.0.2.1"]`), want: []string{"dns|type"}},
		{name: "mtu string", doc: v1(`"nics":[{"mac":"` + mac1 + `","mtu":"1500"}]`), want: []string{"nics[0].mtu|type"}},
		{name: "mac number does not also say required", doc: v1(`"nics":[{"mac":525400123456}]`), want: []string{"nics[0].mac|type"}},
		{name: "bools as strings and numbers", doc: v1(`"ssh_password_auth":"yes","regenerate_ssh_host_keys":1,"users":[{"name":"alice","lock_password":"false"}]`), want: []string{"ssh_password_auth|type", "regenerate_ssh_host_keys|type", "users[0].lock_password|type"}},
		{name: "ssh keys string and null element", doc: v1(`"ssh_authorized_keys":[null],"users":[{"name":"alice","ssh_authorized_keys":"` + testenv.KeyAlice + `"}]`), want: []string{"ssh_authorized_keys[0]|type", "users[0].ssh_authorized_keys|type"}},
		{name: "runcmd object", doc: v1(`"runcmd":{"a":"b"}`), want: []string{"runcmd|type"}},
		{name: "runcmd bad elements", doc: v1(`"runcmd":[5,null,["ls",7],{"cmd":"ls"}]`), want: []string{"runcmd[0]|type", "runcmd[1]|type", "runcmd[2][1]|type", "runcmd[3]|type"}, msg: "got number 5"},
		{name: "meta_data array", doc: v1(`"meta_data":["a"]`), want: []string{"meta_data|type"}},
		{name: "meta_data number out of range", doc: v1(`"meta_data":{"big":1e400}`), want: []string{"meta_data.big|out_of_range"}},
		{name: "file content and groups wrong type", doc: v1(`"files":[{"path":"/a","content":5}],"users":[{"name":"alice","groups":"wheel"}]`), want: []string{"files[0].content|type", "users[0].groups|type"}},
		{name: "ipv4 string", doc: ipv4(`"dhcp"`), want: []string{"nics[0].ipv4|type"}},

		// scalar fields
		{name: "bad id", doc: v1(`"id":"-job"`), want: []string{"id|invalid"}},
		{name: "id too long", doc: v1(`"id":"` + strings.Repeat("a", 129) + `"`), want: []string{"id|invalid"}},
		{name: "bad domain", doc: v1(`"domain":"a/b"`), want: []string{"domain|invalid"}},
		{name: "bad action format media mode", doc: v1(`"action":"reboot","format":"iso","media":"qcow2","user_data_mode":"append","user_data":"#!/bin/sh\n"`), want: []string{"action|invalid", "format|invalid", "media|invalid", "user_data_mode|invalid"}},
		{name: "replace without user data", doc: v1(`"user_data_mode":"replace"`), want: []string{"user_data_mode|conflict"}},
		{name: "domain_xml not XML", doc: v1(`"domain_xml":"hello"`), want: []string{"domain_xml|invalid"}},
		{name: "domain_xml wrong root", doc: v1(`"domain_xml":"<network><name>x</name></network>"`), want: []string{"domain_xml|invalid"}},
		{name: "domain_xml without name", doc: v1(`"domain_xml":"<domain type='qemu'></domain>"`), want: []string{"domain_xml|required"}},
		{name: "domain_xml names another domain", doc: v1(`"domain":"vm1","domain_xml":"<domain type='qemu'><name>vm2</name></domain>"`), want: []string{"domain_xml|conflict"}, msg: `"vm2"`},
		{name: "prebuilt image relative", doc: v1(`"prebuilt_image":"seed.iso"`), want: []string{"prebuilt_image|invalid"}},
		{name: "prebuilt image unclean", doc: v1(`"prebuilt_image":"/srv/../etc/seed.iso"`), want: []string{"prebuilt_image|invalid"}},
		{name: "prebuilt image with content", doc: v1(`"prebuilt_image":"/srv/seed.iso","hostname":"h","user_data":"#cloud-config\n","nics":[{"mac":"` + mac1 + `"}]`), want: []string{"prebuilt_image|conflict"}, msg: "hostname, nics, user_data"},
		{name: "instance id with slash", doc: v1(`"instance_id":"a/b"`), want: []string{"instance_id|invalid"}},
		{name: "instance id with spaces", doc: v1(`"instance_id":" i-1"`), want: []string{"instance_id|invalid"}},

		// host name and time zone
		{name: "hostname leading hyphen", doc: v1(`"hostname":"-web"`), want: []string{"hostname|invalid"}},
		{name: "hostname underscore", doc: v1(`"hostname":"web_1"`), want: []string{"hostname|invalid"}},
		{name: "hostname numeric TLD", doc: v1(`"hostname":"web.123"`), want: []string{"hostname|invalid"}},
		{name: "hostname label too long", doc: v1(`"hostname":"` + strings.Repeat("a", 64) + `.example"`), want: []string{"hostname|invalid"}},
		{name: "hostname empty label", doc: v1(`"hostname":"a..b"`), want: []string{"hostname|invalid"}},
		{name: "timezone unknown", doc: v1(`"timezone":"Mars/Olympus_Mons"`), want: []string{"timezone|not_found"}},
		{name: "timezone Local", doc: v1(`"timezone":"Local"`), want: []string{"timezone|invalid"}},
		{name: "timezone path", doc: v1(`"timezone":"../../etc/passwd"`), want: []string{"timezone|invalid"}},

		// users
		{name: "user without name", doc: v1(`"users":[{"shell":"/bin/sh"}]`), want: []string{"users[0].name|required"}},
		{name: "user names", doc: v1(`"users":[{"name":"Alice"},{"name":"root"},{"name":"bob"},{"name":"bob"}]`), want: []string{"users[0].name|invalid", "users[3].name|duplicate"}},
		{name: "password and hash", doc: v1(`"users":[{"name":"alice","password":"pw","password_hash":"` + testenv.HashA + `"}]`), want: []string{"users[0]|conflict"}},
		{name: "password, hash and secret", doc: v1(`"users":[{"name":"alice","password":"pw","password_hash":"` + testenv.HashA + `","password_secret":"alice.pw"}]`), want: []string{"users[0]|conflict"}, msg: "password, password_hash, password_secret"},
		{name: "password hash plaintext", doc: v1(`"users":[{"name":"alice","password_hash":"hunter2"}]`), want: []string{"users[0].password_hash|invalid"}, noQuote: true},
		{name: "password with newline", doc: v1(`"users":[{"name":"alice","password":"a\nb"}]`), want: []string{"users[0].password|invalid"}, noQuote: true},
		{name: "password secret escapes", doc: v1(`"users":[{"name":"alice","password_secret":"../shadow"},{"name":"bob","password_secret":".hidden"}]`), want: []string{"users[0].password_secret|invalid", "users[1].password_secret|invalid"}},
		{name: "bad ssh keys", doc: v1(`"ssh_authorized_keys":["ssh-rsa notbase64",""],"users":[{"name":"alice","ssh_authorized_keys":["` + testenv.KeyAlice + `\n` + testenv.KeyAlice + `"]}]`), want: []string{"ssh_authorized_keys[0]|invalid", "ssh_authorized_keys[1]|invalid", "users[0].ssh_authorized_keys[0]|invalid"}},
		{name: "sudo, groups, shell", doc: v1(`"users":[{"name":"alice","sudo":"ALL=(ALL) ALL\nroot ALL=(ALL) ALL","groups":["wheel","Bad Group","wheel"],"shell":"bash"}]`), want: []string{"users[0].sudo|invalid", "users[0].groups[1]|invalid", "users[0].groups[2]|duplicate", "users[0].shell|invalid"}},

		// dns
		{name: "dns values", doc: nic1(`"dns":{"nameservers":["192.0.2.1","8.8.8","2001:db8::1","dns.example"],"search":["example.com","bad_domain"]}`), want: []string{"dns.nameservers[1]|invalid", "dns.nameservers[3]|invalid", "dns.search[1]|invalid"}},
		{name: "dns without nics", doc: v1(`"dns":{"nameservers":["192.0.2.1"]}`), want: []string{"dns|required"}},
		{name: "dns with network_config", doc: v1(`"dns":{"nameservers":["192.0.2.1"]},"network_config":"version: 2\n"`), want: []string{"dns|conflict"}},

		// nics
		{name: "nic names", doc: v1(`"nics":[{"name":"eth 0","mac":"` + mac1 + `"},{"name":"eth1","mac":"` + mac2 + `"},{"name":"eth1","mac":"52:54:00:12:34:58"},{"name":"averyveryverylongname","mac":"52:54:00:12:34:59"}]`), want: []string{"nics[0].name|invalid", "nics[2].name|duplicate", "nics[3].name|invalid"}},
		{name: "nic macs", doc: v1(`"nics":[{"name":"a"},{"mac":"52-54-00-12-34-56"},{"mac":"01:00:5e:00:00:01"},{"mac":"` + mac1 + `"},{"mac":"` + strings.ToUpper(mac1) + `"},{"mac":"52:54:00:12:34"}]`), want: []string{"nics[0].mac|required", "nics[1].mac|invalid", "nics[2].mac|invalid", "nics[4].mac|duplicate", "nics[5].mac|invalid"}},
		{name: "mtu ranges", doc: v1(`"nics":[{"mac":"` + mac1 + `","mtu":67},{"mac":"` + mac2 + `","mtu":1000,"ipv6":{"method":"slaac"}},{"mac":"52:54:00:12:34:58","mtu":65536},{"mac":"52:54:00:12:34:59","mtu":-1}]`), want: []string{"nics[0].mtu|out_of_range", "nics[1].mtu|out_of_range", "nics[2].mtu|out_of_range", "nics[3].mtu|out_of_range"}},
		{name: "ip methods", doc: v1(`"nics":[{"mac":"` + mac1 + `","ipv4":{"method":"auto"},"ipv6":{"method":"bogus"}},{"mac":"` + mac2 + `","ipv4":{"method":"slaac"},"ipv6":{}}]`), want: []string{"nics[0].ipv4.method|invalid", "nics[0].ipv6.method|invalid", "nics[1].ipv4.method|invalid", "nics[1].ipv6.method|required"}},
		{name: "static without address", doc: ipv4(`{"method":"static","gateway":"192.0.2.1"}`), want: []string{"nics[0].ipv4.address|required"}},
		{name: "address not CIDR", doc: ipv4(`{"method":"static","address":"192.0.2.10"}`), want: []string{"nics[0].ipv4.address|invalid"}},
		{name: "address leading zero", doc: ipv4(`{"method":"static","address":"192.0.2.010/24"}`), want: []string{"nics[0].ipv4.address|invalid"}},
		{name: "ipv6 address in ipv4", doc: ipv4(`{"method":"static","address":"2001:db8::10/64"}`), want: []string{"nics[0].ipv4.address|invalid"}},
		{name: "ipv4 address in ipv6", doc: ipv6(`{"method":"static","address":"192.0.2.10/24"}`), want: []string{"nics[0].ipv6.address|invalid"}},
		{name: "mapped address in ipv6", doc: ipv6(`{"method":"static","address":"::ffff:192.0.2.10/120"}`), want: []string{"nics[0].ipv6.address|invalid"}},
		{name: "zoned address", doc: ipv6(`{"method":"static","address":"fe80::1%eth0/64"}`), want: []string{"nics[0].ipv6.address|invalid"}},
		{name: "network address", doc: ipv4(`{"method":"static","address":"192.0.2.0/24"}`), want: []string{"nics[0].ipv4.address|invalid"}},
		{name: "broadcast address", doc: ipv4(`{"method":"static","address":"192.0.2.255/24"}`), want: []string{"nics[0].ipv4.address|invalid"}},
		{name: "gateway outside subnet", doc: ipv4(`{"method":"static","address":"192.0.2.10/24","gateway":"198.51.100.1"}`), want: []string{"nics[0].ipv4.gateway|invalid"}, msg: "192.0.2.0/24"},
		{name: "gateway wrong family", doc: ipv4(`{"method":"static","address":"192.0.2.10/24","gateway":"2001:db8::1"}`), want: []string{"nics[0].ipv4.gateway|invalid"}},
		{name: "gateway not an address", doc: ipv6(`{"method":"static","address":"2001:db8::10/64","gateway":"router"}`), want: []string{"nics[0].ipv6.gateway|invalid"}},
		{name: "gateway is own address", doc: ipv4(`{"method":"static","address":"192.0.2.10/24","gateway":"192.0.2.10"}`), want: []string{"nics[0].ipv4.gateway|invalid"}},
		{name: "gateway is broadcast", doc: ipv4(`{"method":"static","address":"192.0.2.10/24","gateway":"192.0.2.255"}`), want: []string{"nics[0].ipv4.gateway|invalid"}},
		{name: "ipv6 gateway outside prefix", doc: ipv6(`{"method":"static","address":"2001:db8::10/64","gateway":"2001:db8:1::1"}`), want: []string{"nics[0].ipv6.gateway|invalid"}},
		{name: "dhcp with address", doc: v1(`"nics":[{"mac":"` + mac1 + `","ipv4":{"method":"dhcp","address":"192.0.2.10/24"},"ipv6":{"method":"slaac","gateway":"fe80::1"}}]`), want: []string{"nics[0].ipv4|conflict", "nics[0].ipv6|conflict"}},

		// files
		{name: "file paths", doc: v1(`"files":[{"path":"etc/motd","content":""},{"path":"/etc/../shadow","content":""},{"path":"/etc/","content":""},{"path":"/","content":""},{"path":"","content":""},{"path":"/a//b","content":""}]`), want: []string{"files[0].path|invalid", "files[1].path|invalid", "files[2].path|invalid", "files[3].path|invalid", "files[4].path|required", "files[5].path|invalid"}},
		{name: "duplicate file path", doc: v1(`"files":[{"path":"/etc/motd","content":"a"},{"path":"/etc/motd","content":"b"}]`), want: []string{"files[1].path|duplicate"}},
		{name: "file encoding and base64", doc: v1(`"files":[{"path":"/a","content":"x","encoding":"gzip"},{"path":"/b","content":"not base64!","encoding":"base64"},{"path":"/c","content":"aGk","encoding":"base64"}]`), want: []string{"files[0].encoding|invalid", "files[1].content|invalid", "files[2].content|invalid"}},
		{name: "file permissions and owner", doc: v1(`"files":[{"path":"/a","content":"","permissions":"rw-r--r--"},{"path":"/b","content":"","permissions":"0888"},{"path":"/c","content":"","permissions":"644","owner":"root"},{"path":"/d","content":"","owner":"root:Bad Group"}]`), want: []string{"files[0].permissions|invalid", "files[1].permissions|invalid", "files[2].owner|invalid", "files[3].owner|invalid"}},

		// runcmd
		{name: "empty commands", doc: v1(`"runcmd":["", "  ", []]`), want: []string{"runcmd[0]|required", "runcmd[1]|required", "runcmd[2]|required"}},
		{name: "NUL in commands", doc: v1(`"runcmd":["echo \u0000", ["echo", "a\u0000"]]`), want: []string{"runcmd[0]|invalid", "runcmd[1][1]|invalid"}},

		// user-data, network-config, vendor-data
		{name: "user_data not recognised", doc: v1(`"user_data":"hostname: x\n"`), want: []string{"user_data|invalid"}, msg: `"hostname: x\n"`},
		{name: "user_data bad YAML", doc: v1(`"user_data":"#cloud-config\npackages: [a\n"`), want: []string{"user_data|invalid"}},
		{name: "user_data list", doc: v1(`"user_data":"#cloud-config\n- a\n"`), want: []string{"user_data|invalid"}, msg: "list"},
		{name: "user_data two documents", doc: v1(`"user_data":"#cloud-config\na: 1\n---\nb: 2\n"`), want: []string{"user_data|invalid"}},
		{name: "user_data alias bomb", doc: v1(`"user_data":` + jstr(aliasBomb("#cloud-config\n"))), want: []string{"user_data|invalid"}, msg: "excessive aliasing"},
		{name: "user_data multipart without boundary", doc: v1(`"user_data":"MIME-Version: 1.0\nContent-Type: multipart/mixed\n\nx"`), want: []string{"user_data|invalid"}},
		{name: "user_data NUL", doc: v1(`"user_data":"#!/bin/sh\n\u0000"`), want: []string{"user_data|invalid"}},
		{name: "user_data and secret", doc: v1(`"user_data":"#!/bin/sh\n","user_data_secret":"ud"`), want: []string{"user_data|conflict"}},
		{name: "all three user_data sources", doc: v1(`"user_data":"#!/bin/sh\n","user_data_base64":"IyEvYmluL3NoCg==","user_data_secret":"ud"`), want: []string{"user_data|conflict"}, msg: "user_data, user_data_base64, user_data_secret"},
		{name: "user_data_base64 not base64", doc: v1(`"user_data_base64":"#!/bin/sh"`), want: []string{"user_data_base64|invalid"}},
		{name: "user_data_base64 content unrecognised", doc: v1(`"user_data_base64":"` + base64.StdEncoding.EncodeToString([]byte("hello\n")) + `"`), want: []string{"user_data_base64|invalid"}, msg: `"hello\n"`, noQuote: true},
		{name: "user_data_secret path", doc: v1(`"user_data_secret":"secrets/ud"`), want: []string{"user_data_secret|invalid"}},
		{name: "meta_data keys", doc: v1(`"meta_data":{"":1,"ok":2,"b\nc":3}`), want: []string{"meta_data.|invalid", "meta_data.b\nc|invalid"}, noQuote: true},
		{name: "network_config with nics", doc: nic1(`"network_config":"version: 2\n"`), want: []string{"network_config|conflict"}},
		{name: "network_config wrapper with other keys", doc: v1(`"network_config":"network:\n  version: 2\n  ethernets: {}\nextra: 1\n"`), want: []string{"network_config|invalid"}, msg: `"network:"`},
		{name: "network_config wrapper with a bad version", doc: v1(`"network_config":"network:\n  version: 3\n"`), want: []string{"network_config.network.version|unsupported"}},
		{name: "network_config without version", doc: v1(`"network_config":"ethernets: {}\n"`), want: []string{"network_config.version|required"}},
		{name: "network_config version 3", doc: v1(`"network_config":"version: 3\n"`), want: []string{"network_config.version|unsupported"}, msg: `"3"`},
		{name: "network_config not a mapping", doc: v1(`"network_config":"- version: 2\n"`), want: []string{"network_config|invalid"}},
		{name: "network_config bad YAML", doc: v1(`"network_config":"version: 2\nethernets: {a: [}\n"`), want: []string{"network_config|invalid"}},
		{name: "network_config alias bomb", doc: v1(`"network_config":` + jstr("version: 2\n"+aliasBomb(""))), want: []string{"network_config|invalid"}, msg: "excessive aliasing"},
		{name: "vendor_data bad", doc: v1(`"vendor_data":"#cloud-config\n: : :\n\t- x"`), want: []string{"vendor_data|invalid"}},

		// root, host keys, locale, power state, phone home, random seed, network_data
		{name: "root with groups, shell, sudo", doc: v1(`"users":[{"name":"root","groups":["adm"],"shell":"/bin/zsh","sudo":"ALL=(ALL) ALL"}]`), want: []string{"users[0].groups|invalid", "users[0].shell|invalid", "users[0].sudo|invalid"}, noQuote: true},
		{name: "root key also top-level", doc: v1(`"ssh_authorized_keys":["` + testenv.KeyAlice + `"],"users":[{"name":"root","ssh_authorized_keys":["` + testenv.KeyAlice + `"]}]`), want: []string{"users[0].ssh_authorized_keys[0]|conflict"}},
		{name: "root twice", doc: v1(`"users":[{"name":"root"},{"name":"root"}]`), want: []string{"users[1].name|duplicate"}},
		{name: "locale forms", doc: v1(`"locale":"en-US"`), want: []string{"locale|invalid"}},
		{name: "locale injection", doc: v1(`"locale":"en_US.UTF-8\nLC_ALL=x"`), want: []string{"locale|invalid"}},
		{name: "host key type and secret", doc: v1(`"ssh_host_keys":[{"type":"dsa","private_key_secret":"k"},{"type":"rsa","private_key_secret":"../k"},{"type":"rsa","private_key_secret":""}]`), want: []string{"ssh_host_keys[0].type|invalid", "ssh_host_keys[1].private_key_secret|invalid", "ssh_host_keys[2].type|duplicate", "ssh_host_keys[2].private_key_secret|required"}},
		{name: "host key missing type", doc: v1(`"ssh_host_keys":[{"private_key_secret":"k"}]`), want: []string{"ssh_host_keys[0].type|required"}},
		{name: "host key public of other type", doc: v1(`"ssh_host_keys":[{"type":"rsa","private_key_secret":"k","public_key":"` + testenv.KeyAlice + `"}]`), want: []string{"ssh_host_keys[0].public_key|invalid"}},
		{name: "host key public garbage", doc: v1(`"ssh_host_keys":[{"type":"ed25519","private_key_secret":"k","public_key":"ssh-ed25519 nope"}]`), want: []string{"ssh_host_keys[0].public_key|invalid"}},
		{name: "host keys without regeneration", doc: v1(`"regenerate_ssh_host_keys":false,"ssh_host_keys":[{"type":"ed25519","private_key_secret":"k"}]`), want: []string{"ssh_host_keys|conflict"}},
		{name: "host key inline private key", doc: v1(`"ssh_host_keys":[{"type":"ed25519","private_key":"-----BEGIN"}]`), want: []string{"ssh_host_keys[0].private_key|unknown_field", "ssh_host_keys[0].private_key_secret|required"}},
		{name: "power state mode", doc: v1(`"power_state":{"mode":"halt-and-catch-fire"}`), want: []string{"power_state.mode|invalid"}},
		{name: "power state missing mode", doc: v1(`"power_state":{"delay_minutes":1}`), want: []string{"power_state.mode|required"}},
		{name: "power state ranges", doc: v1(`"power_state":{"mode":"reboot","delay_minutes":-1,"timeout_seconds":100000,"message":"a\nb","condition":""}`), want: []string{"power_state.delay_minutes|out_of_range", "power_state.timeout_seconds|out_of_range", "power_state.message|invalid", "power_state.condition|required"}},
		{name: "power state condition type", doc: v1(`"power_state":{"mode":"poweroff","condition":true}`), want: []string{"power_state.condition|type"}},
		{name: "phone home url", doc: v1(`"phone_home":{"url":"ftp://example.com/x"}`), want: []string{"phone_home.url|invalid"}},
		{name: "phone home no host", doc: v1(`"phone_home":{"url":"http:///x"}`), want: []string{"phone_home.url|invalid"}},
		{name: "phone home missing url", doc: v1(`"phone_home":{"tries":3}`), want: []string{"phone_home.url|required"}},
		{name: "phone home post and tries", doc: v1(`"phone_home":{"url":"https://h/p","post":["instance_id","password","instance_id"],"tries":1000}`), want: []string{"phone_home.post[1]|invalid", "phone_home.post[2]|duplicate", "phone_home.tries|out_of_range"}},
		{name: "phone home empty post", doc: v1(`"phone_home":{"url":"https://h/p","post":[]}`), want: []string{"phone_home.post|required"}},
		{name: "random seed both", doc: v1(`"random_seed":{"data":"` + strings.Repeat("A", 24) + `","generate_bytes":32}`), want: []string{"random_seed|conflict"}},
		{name: "random seed neither", doc: v1(`"random_seed":{}`), want: []string{"random_seed|required"}},
		{name: "random seed not base64", doc: v1(`"random_seed":{"data":"not base64!"}`), want: []string{"random_seed.data|invalid"}},
		{name: "random seed too short", doc: v1(`"random_seed":{"data":"AAAA"}`), want: []string{"random_seed.data|out_of_range"}},
		{name: "random seed generate range", doc: v1(`"random_seed":{"generate_bytes":1000000}`), want: []string{"random_seed.generate_bytes|out_of_range"}},
		{name: "configdrive with network_config", doc: v1(`"format":"configdrive","network_config":"version: 2\nethernets: {}\n"`), want: []string{"network_config|conflict"}, noQuote: true},
		{name: "replace mode drops runcmd", doc: v1(`"user_data_mode":"replace","user_data":"#!/bin/sh\necho hi\n","runcmd":["echo lost"]`), want: []string{"user_data_mode|conflict"}, noQuote: true},
		{name: "replace mode drops a nocloud random_seed", doc: v1(`"format":"nocloud","user_data_mode":"replace","user_data":"#!/bin/sh\ntrue\n","random_seed":{"generate_bytes":64}`), want: []string{"user_data_mode|conflict"}, noQuote: true},
		{name: "network_data with nocloud", doc: v1(`"format":"nocloud","network_data":{"links":[{"id":"l0","type":"phy","ethernet_mac_address":"` + mac1 + `"}]}`), want: []string{"network_data|conflict"}},
		{name: "network_data with nics", doc: nic1(`"format":"configdrive","network_data":{"links":[{"id":"l0","type":"phy","ethernet_mac_address":"` + mac1 + `"}]}`), want: []string{"network_data|conflict"}},
		{name: "network_data shape", doc: v1(`"format":"configdrive","network_data":{"links":[{"id":"l0","type":"phy"},{"id":"l0","type":"phy","ethernet_mac_address":"zz","mtu":10}],"networks":[{"id":"n0","type":"ipv5","link":"l9"},{"id":"n1","type":"ipv4","link":"l0","ip_address":"2001:db8::1","netmask":"255.0.255.0","routes":[{"network":"0.0.0.0","netmask":"0.0.0.0","gateway":"x"}]}],"services":[{"type":"dns","address":"nope"}],"extra":[]}`),
			want: []string{"network_data.extra|unknown_field", "network_data.links[0]|required", "network_data.links[1].id|duplicate", "network_data.links[1].ethernet_mac_address|invalid", "network_data.links[1].mtu|out_of_range",
				"network_data.networks[0].type|invalid", "network_data.networks[0].link|not_found", "network_data.networks[1].ip_address|invalid", "network_data.networks[1].netmask|invalid",
				"network_data.networks[1].routes[0].gateway|invalid", "network_data.services[0].address|invalid"}, noQuote: true},
		{name: "network_data missing links", doc: v1(`"format":"configdrive","network_data":{"links":"x"}`), want: []string{"network_data.links|type"}},
		{name: "random seed also in meta_data", doc: v1(`"random_seed":{"generate_bytes":64},"meta_data":{"random_seed":"QUJD"}`), want: []string{"meta_data.random_seed|conflict"}},
		{name: "config-2 meta_data random_seed not base64", doc: v1(`"format":"configdrive","meta_data":{"random_seed":"not base64!"}`), want: []string{"meta_data.random_seed|invalid"}},
		{name: "prebuilt with new fields", doc: v1(`"prebuilt_image":"/x.iso","locale":"C.UTF-8","random_seed":{"generate_bytes":64}`), want: []string{"prebuilt_image|conflict"}},

		// many problems at once
		{name: "everything wrong at once", doc: `{"version":3,"id":"!","hostname":"-h","timezone":"Nowhere/Town","extra":1,
			"users":[{"name":"alice","password":"x","password_hash":"$6$a$b","unknown":1}],
			"nics":[{"mac":"zz","mtu":10,"ipv4":{"method":"static","address":"10.0.0.1/8","gateway":"11.0.0.1"}}],
			"files":[{"path":"rel","content":"x","permissions":"9"}],
			"runcmd":[""],"user_data":"nope","network_config":"version: 2\n","version":1}`,
			want: []string{"version|duplicate_key", "version|unsupported", "id|invalid", "hostname|invalid", "timezone|not_found", "extra|unknown_field",
				"users[0].unknown|unknown_field", "users[0]|conflict", "nics[0].mac|invalid", "nics[0].mtu|out_of_range", "nics[0].ipv4.gateway|invalid",
				"files[0].path|invalid", "files[0].permissions|invalid", "runcmd[0]|required", "user_data|invalid", "network_config|conflict"}},
	}
}

// lookup finds the value at a field path in a generic decoding of doc.
func lookup(doc any, field string) (any, bool) {
	seg := regexp.MustCompile(`([^.\[\]]+)|\[(\d+)\]`)
	cur := doc
	for _, m := range seg.FindAllStringSubmatch(field, -1) {
		switch {
		case m[1] != "":
			o, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = o[m[1]]; !ok {
				return nil, false
			}
		default:
			a, ok := cur.([]any)
			i, _ := strconv.Atoi(m[2])
			if !ok || i >= len(a) {
				return nil, false
			}
			cur = a[i]
		}
	}
	return cur, true
}

// checkQuoted asserts that a message quotes the value the error is about.
func checkQuoted(t *testing.T, doc string, e FieldError) {
	t.Helper()
	var tree any
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	if dec.Decode(&tree) != nil {
		return
	}
	if e.Code == CodeUnknownField || e.Code == CodeDuplicateKey {
		key := e.Field[strings.LastIndex(e.Field, ".")+1:]
		if !strings.Contains(e.Message, Quote(key)) {
			t.Errorf("%s: message %q does not quote the key %s", e.Field, e.Message, Quote(key))
		}
		return
	}
	switch e.Code {
	case CodeInvalid, CodeType, CodeOutOfRange, CodeDuplicate, CodeNotFound, CodeUnsupported:
	default:
		return
	}
	v, ok := lookup(tree, e.Field)
	if !ok {
		return
	}
	var want string
	switch v := v.(type) {
	case string:
		want = Quote(v)
	case json.Number:
		want = v.String()
	default:
		return
	}
	if !strings.Contains(e.Message, want) {
		t.Errorf("%s: message %q does not quote the value %s", e.Field, e.Message, want)
	}
}

func pairs(errs []FieldError) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Field + "|" + e.Code
	}
	sort.Strings(out)
	return out
}

func TestBadJobs(t *testing.T) {
	cases := badCases()
	if len(cases) < 60 {
		t.Fatalf("only %d bad cases", len(cases))
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, r := Parse([]byte(tc.doc))
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Parse took %v", d)
			}
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			if got := pairs(r.Errors); !reflect.DeepEqual(got, want) {
				t.Fatalf("errors:\n got  %q\n want %q\nreport: %v", got, want, r.Err())
			}
			for _, e := range r.Errors {
				if e.Message == "" || e.Code == "" {
					t.Errorf("empty code or message: %+v", e)
				}
				if !tc.noQuote {
					checkQuoted(t, tc.doc, e)
				}
			}
			if tc.msg != "" {
				first := tc.want[0]
				found := false
				for _, e := range r.Errors {
					if e.Field+"|"+e.Code == first && strings.Contains(e.Message, tc.msg) {
						found = true
					}
				}
				if !found {
					t.Errorf("no %s error mentions %q: %v", first, tc.msg, r.Err())
				}
			}
			// the report as an error
			if ve, ok := r.Err().(*ValidationError); !ok || len(ve.Errors) != len(r.Errors) {
				t.Errorf("Err() %T %v", r.Err(), r.Err())
			}
		})
	}
}

func TestPasswordsNeverEchoed(t *testing.T) {
	doc := v1(`"users":[{"name":"alice","password":"s3cr\u0000et"},{"name":"bob","password_hash":"$9$s3cr3th4sh"}]`)
	_, r := Parse([]byte(doc))
	if len(r.Errors) != 2 {
		t.Fatalf("want 2 errors, got %v", r.Err())
	}
	for _, e := range r.Errors {
		if strings.Contains(e.Message, "s3cr") {
			t.Errorf("%s: message echoes a secret: %q", e.Field, e.Message)
		}
	}
}

func TestFileContentLimit(t *testing.T) {
	big := strings.Repeat("x", MaxContentBytes/2+1)
	j := Job{Version: 1, Files: []File{{Path: "/a", Content: big}, {Path: "/b", Content: base64.StdEncoding.EncodeToString([]byte(big)), Encoding: EncodingBase64}}}
	got := pairs(j.Validate().Errors)
	if want := []string{"files|too_large"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	j.Files = j.Files[:1]
	if r := j.Validate(); !r.OK() {
		t.Fatalf("half the limit rejected: %v", r.Err())
	}
}

func TestJobSizeBoundary(t *testing.T) {
	// a document of exactly MaxJobBytes is accepted
	prefix := `{"version":1,"vendor_data":"#cloud-config\n# `
	doc := prefix + strings.Repeat("x", MaxJobBytes-len(prefix)-2) + `"}`
	if len(doc) != MaxJobBytes {
		t.Fatalf("built %d bytes", len(doc))
	}
	if _, r := Parse([]byte(doc)); !r.OK() {
		t.Fatalf("rejected a document of exactly the limit: %v", r.Err())
	}
}

func fullJob() string {
	return `{
  "version": 1,
  "id": "job-42.a_b",
  "domain": "web1",
  "action": "start",
  "domain_xml": "<domain type='qemu'><name>web1</name><memory unit='MiB'>1024</memory></domain>",
  "format": "nocloud",
  "media": "iso",
  "instance_id": "iid-web1-0001",
  "guest_report": false,
  "hostname": "web1.example.com",
  "timezone": "Europe/Berlin",
  "users": [
    {"name": "alice", "password": "correct horse", "ssh_authorized_keys": ["` + testenv.KeyAlice + `"],
     "sudo": "ALL=(ALL) NOPASSWD:ALL", "groups": ["sudo", "adm"], "shell": "/bin/bash", "lock_password": false},
    {"name": "bob", "password_hash": "` + testenv.HashA + `"},
    {"name": "carol", "password_secret": "carol.pw", "lock_password": true}
  ],
  "ssh_authorized_keys": ["` + testenv.KeyAlice + `"],
  "regenerate_ssh_host_keys": true,
  "ssh_password_auth": true,
  "locale": "de_DE.UTF-8",
  "ssh_host_keys": [{"type": "ed25519", "private_key_secret": "host-ed25519", "public_key": "` + testenv.KeyAlice + `"}],
  "power_state": {"mode": "poweroff", "delay_minutes": 2, "message": "bye", "timeout_seconds": 60, "condition": ["test", "-e", "/tmp/argv"]},
  "phone_home": {"url": "https://cfg.example.com/up/$INSTANCE_ID", "post": ["instance_id", "pub_key_ed25519"], "tries": 3},
  "random_seed": {"data": "` + strings.Repeat("QUJD", 8) + `"},
  "dns": {"nameservers": ["192.0.2.53", "2001:db8::53"], "search": ["example.com", "corp.example."]},
  "nics": [
    {"name": "eth0", "mac": "52:54:00:12:34:56", "mtu": 1500,
     "ipv4": {"method": "static", "address": "192.0.2.10/24", "gateway": "192.0.2.1"},
     "ipv6": {"method": "static", "address": "2001:db8::10/64", "gateway": "fe80::1"}},
    {"name": "eth1", "mac": "52:54:00:AB:CD:EF", "mtu": 9000,
     "ipv4": {"method": "dhcp"}, "ipv6": {"method": "slaac"}},
    {"mac": "52:54:00:12:34:58", "ipv4": {"method": "none"}, "ipv6": {"method": "dhcp"}}
  ],
  "files": [
    {"path": "/etc/motd", "content": "hello\n", "encoding": "text", "permissions": "0644", "owner": "root:root"},
    {"path": "/usr/local/bin/hi", "content": "IyEvYmluL3NoCmVjaG8g\naGkK", "encoding": "base64", "permissions": "0755"},
    {"path": "/etc/empty", "content": ""}
  ],
  "runcmd": ["echo hello > /tmp/hi", ["touch", "/tmp/argv"]],
  "user_data": "#cloud-config\npackages: [htop]\nwrite_files:\n  - path: /etc/x\n    content: y\n",
  "user_data_mode": "merge",
  "meta_data": {"availability-zone": "zone-a", "nested": {"a": [1, 2.5, true, null, "s"]}},
  "vendor_data": "#cloud-config\nntp: {enabled: true}\n"
}`
}

func TestGoodJobs(t *testing.T) {
	multipart := "Content-Type: multipart/mixed; boundary=\"XX\"\nMIME-Version: 1.0\n\n--XX\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho hi\n--XX--\n"
	cases := []struct{ name, doc string }{
		{"every field", fullJob()},
		{"minimal", `{"version":1}`},
		{"root account", v1(`"ssh_authorized_keys":["` + testenv.KeyAlice + `"],"users":[{"name":"root","password":"pw","ssh_authorized_keys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ9UCj6yFbzrJRqgbKp1+pjOWpNQWIeq40ujmhEHvz3p root@x"],"lock_password":false}]`)},
		{"locales", v1(`"locale":"sr_RS.UTF-8@latin"`)},
		{"locale C", v1(`"locale":"C.UTF-8"`)},
		{"locale POSIX", v1(`"locale":"POSIX"`)},
		{"power state minimal", v1(`"power_state":{"mode":"reboot","condition":"test -f /run/x"}`)},
		{"phone home minimal", v1(`"phone_home":{"url":"http://192.0.2.1:8080/"}`)},
		{"random seed generated", v1(`"random_seed":{"generate_bytes":512}`)},
		{"host keys of three types", v1(`"ssh_host_keys":[{"type":"ed25519","private_key_secret":"a"},{"type":"ecdsa","private_key_secret":"b"},{"type":"rsa","private_key_secret":"c"}]`)},
		{"network_data", v1(`"format":"configdrive","network_data":{"links":[{"id":"l0","type":"phy","ethernet_mac_address":"` + mac1 + `","mtu":1500}],"networks":[{"id":"n0","type":"ipv4","link":"l0","ip_address":"192.0.2.10","netmask":"255.255.255.0","routes":[{"network":"0.0.0.0","netmask":"0.0.0.0","gateway":"192.0.2.1"}]},{"id":"n1","type":"ipv6_slaac","link":"l0"}],"services":[{"type":"dns","address":"192.0.2.53"}]}`)},
		{"whitespace and CRLF", "\r\n  {\r\n \"version\" : 1 \r\n}\r\n"},
		{"nulls for optional fields", v1(`"id":null,"hostname":null,"users":null,"dns":null,"nics":null,"runcmd":null,"meta_data":null,"ssh_password_auth":null`)},
		{"empty arrays and objects", v1(`"users":[],"nics":[],"files":[],"runcmd":[],"ssh_authorized_keys":[],"meta_data":{}`)},
		{"configdrive vfat attach", v1(`"domain":"0a1b2c3d-4e5f-6789-abcd-ef0123456789","action":"attach","format":"configdrive","media":"vfat","hostname":"h"`)},
		{"detach", v1(`"domain":"vm 1","action":"detach"`)},
		{"prebuilt image alone", v1(`"domain":"vm1","prebuilt_image":"/var/lib/seeds/vm1.iso","action":"attach","format":"nocloud","media":"iso"`)},
		{"domain matched by uuid", v1(`"domain":"0A1B2C3D-4E5F-6789-ABCD-EF0123456789","domain_xml":"<domain><name>x</name><uuid>0a1b2c3d-4e5f-6789-abcd-ef0123456789</uuid></domain>"`)},
		{"fqdn with trailing dot", v1(`"hostname":"host.example.com."`)},
		{"single-label and digit-leading host names", v1(`"hostname":"1web"`)},
		{"UTC and Etc zones", v1(`"timezone":"UTC"`)},
		{"Etc zone", v1(`"timezone":"Etc/GMT+5"`)},
		{"user minimal", v1(`"users":[{"name":"_svc"},{"name":"deploy-1"}]`)},
		{"ssh key with options", v1(`"ssh_authorized_keys":["from=\"10.0.0.0/8\",no-pty ` + testenv.KeyAlice + `"]`)},
		{"yescrypt and bcrypt hashes", v1(`"users":[{"name":"a","password_hash":"$y$j9T$abc$def"},{"name":"b","password_hash":"$2b$12$abcdefghijklmnopqrstuv"}]`)},
		{"ipv4 /31 and /32", v1(`"nics":[{"mac":"` + mac1 + `","ipv4":{"method":"static","address":"192.0.2.0/31","gateway":"192.0.2.1"}},{"mac":"` + mac2 + `","ipv4":{"method":"static","address":"192.0.2.7/32"}}]`)},
		{"ipv6 only with mtu 1280", v1(`"nics":[{"mac":"` + mac1 + `","mtu":1280,"ipv6":{"method":"static","address":"2001:db8::10/64","gateway":"2001:db8::1"}}]`)},
		{"mtu 68 ipv4 only", v1(`"nics":[{"mac":"` + mac1 + `","mtu":68}]`)},
		{"dns with dhcp nic", nic1(`"dns":{"nameservers":["192.0.2.53"]}`)},
		{"permissions forms", v1(`"files":[{"path":"/a","content":"","permissions":"644"},{"path":"/b","content":"","permissions":"4755"},{"path":"/c","content":"","permissions":"01777"}]`)},
		{"script user_data", v1(`"user_data":"#!/bin/bash\necho hi\n"`)},
		{"multipart user_data", v1(`"user_data":` + jstr(multipart))},
		{"empty cloud-config", v1(`"user_data":"#cloud-config\n"`)},
		{"include, boothook, jinja, archive", v1(`"vendor_data":"#cloud-boothook\necho\n","user_data":"## template: jinja\n#cloud-config\nhostname: {{ v1.local_hostname }}\n"`)},
		{"cloud-config-archive", v1(`"user_data":"#cloud-config-archive\n- type: text/cloud-config\n  content: 'a: 1'\n"`)},
		{"replace mode", v1(`"user_data":"#cloud-config\nhostname: x\n","user_data_mode":"replace"`)},
		{"merge mode without user data", v1(`"user_data_mode":"merge","hostname":"h"`)},
		{"base64 user data", v1(`"user_data_base64":"` + base64.StdEncoding.EncodeToString([]byte("#cloud-config\na: 1\n")) + `"`)},
		{"user data secret", v1(`"user_data_secret":"web1.user-data","user_data_mode":"replace"`)},
		{"network_config v1", v1(`"network_config":"version: 1\nconfig:\n  - type: physical\n    name: eth0\n    subnets: [{type: dhcp}]\n"`)},
		{"network_config v2", v1(`"network_config":"#comment\nversion: 2\nethernets:\n  id0:\n    match: {macaddress: '52:54:00:12:34:56'}\n    dhcp4: true\n"`)},
		{"network_config with version next to network key", v1(`"network_config":"version: 2\nnetwork: {}\n"`)},
		{"unicode everywhere", v1(`"users":[{"name":"alice","sudo":"ALL=(ALL) ALL"}],"files":[{"path":"/etc/grüße","content":"héllo ☃"}],"runcmd":["echo ☃"]`)},
		{"large integer meta_data", v1(`"meta_data":{"n":12345678901234567890,"f":1e300,"neg":-5}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j, r := Parse([]byte(tc.doc))
			if !r.OK() {
				t.Fatalf("unexpected problems: %v", r.Err())
			}
			if j == nil {
				t.Fatal("nil job")
			}
			roundTrip(t, j)
		})
	}
}

// roundTrip asserts that a valid job re-encodes to a document that parses
// cleanly into the same job.
func roundTrip(t *testing.T, j *Job) []byte {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	j2, r := Parse(b)
	if !r.OK() {
		t.Fatalf("re-encoded job has problems: %v\n%s", r.Err(), b)
	}
	b2, err := json.Marshal(j2)
	if err != nil {
		t.Fatalf("marshal again: %v", err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("round trip changed the job:\n%s\n%s", b, b2)
	}
	return b
}

// exclusive names the fields the full job cannot set together with others;
// the good-jobs table covers them.
var exclusive = map[string]bool{"PrebuiltImage": true, "PasswordHash": true, "PasswordSecret": true, "UserDataBase64": true, "UserDataSecret": true, "VendorDataBase64": true, "NetworkConfig": true, "NetworkData": true, "GenerateBytes": true,
	"Ignition": true, "IgnitionBase64": true, "IgnitionDelivery": true, // format ignition: ignition_test.go
	"Butane":  true,                                            // format ignition: butane_test.go
	"GuestOS": true, "AdminUsername": true, "AdminCerts": true, // guest_os windows: windows_test.go
	"Sysprep": true, "SysprepBase64": true, "SysprepSecret": true, "SysprepFileName": true, "SysprepMedium": true,
	"WindowsTimezone": true, "JoinDomain": true, "DomainAdmin": true, "DomainAdminPasswordSecret": true, "MachineObjectOU": true,
	"ProductKeySecret": true, "OrgName": true, "InputLocale": true, "UILanguage": true, "SystemLocale": true, "UserLocale": true, // format sysprep: sysprep_test.go
	"AdminPasswordSecret": true, // guest_os windows (configdrive) or format sysprep: windows_test.go, sysprep_test.go
	// format credentials: credentials_test.go
	"Keymap": true, "Motd": true, "Issue": true, "Credentials": true, "CredentialSecrets": true, "CredentialsDelivery": true}

func TestFullJobDecodesEveryField(t *testing.T) {
	j, r := Parse([]byte(fullJob()))
	if !r.OK() {
		t.Fatal(r.Err())
	}
	// every field of Job, User, NIC, IPConfig, File and DNS is set
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				t.Errorf("%s not decoded", path)
				return
			}
			walk(v.Elem(), path)
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(Command{}) {
				return
			}
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				p := path + "." + f.Name
				if v.Field(i).IsZero() && f.Type.Kind() != reflect.Bool && !exclusive[f.Name] {
					// users[0] has every user field; others may leave some out
					if strings.Contains(path, "Users[0]") || !strings.Contains(path, "[") || strings.Contains(path, "NICs[0]") || strings.Contains(path, "Files[0]") {
						t.Errorf("%s not decoded", p)
					}
					continue
				}
				walk(v.Field(i), p)
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(reflect.ValueOf(j).Elem(), "job")
	if got := j.Users[0].Password; got != "correct horse" {
		t.Errorf("password %q", got)
	}
	if *j.Users[2].LockPassword != true || *j.RegenerateSSHHostKeys != true {
		t.Errorf("bools not decoded")
	}
	if n := j.MetaData["nested"].(map[string]any)["a"].([]any); !reflect.DeepEqual(n, []any{int64(1), 2.5, true, nil, "s"}) {
		t.Errorf("meta_data nested = %#v", n)
	}
}

func TestRuncmdShapeRoundTrip(t *testing.T) {
	j, r := Parse([]byte(v1(`"runcmd":["echo a b", ["echo", "a b"], ["true"], "ls"]`)))
	if !r.OK() {
		t.Fatal(r.Err())
	}
	want := []Command{{Shell: "echo a b"}, {Argv: []string{"echo", "a b"}}, {Argv: []string{"true"}}, {Shell: "ls"}}
	if !reflect.DeepEqual(j.Runcmd, want) {
		t.Fatalf("runcmd = %#v", j.Runcmd)
	}
	if j.Runcmd[0].IsArgv() || !j.Runcmd[2].IsArgv() {
		t.Errorf("IsArgv wrong")
	}
	b, err := json.Marshal(j.Runcmd)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `["echo a b",["echo","a b"],["true"],"ls"]` {
		t.Errorf("marshalled %s", got)
	}
	roundTrip(t, j)
}

// TestApply: every default is filled in by Apply, explicit values are
// kept, the agent's guest_report follows its rules, and applying twice
// changes nothing.
func TestApply(t *testing.T) {
	on, off := true, false
	agentOn, agentOff := Defaults{GuestReport: &on}, Defaults{GuestReport: &off}
	cases := []struct {
		name   string
		j      Job
		d      Defaults
		want   Job
		report *bool
	}{
		{name: "fixed defaults", j: Job{Version: 1},
			want: Job{Version: 1, Action: ActionStart, Format: FormatNoCloud, Media: MediaISO, UserDataMode: ModeMerge}},
		{name: "explicit values kept", j: Job{Action: ActionDetach, Format: FormatConfigDrive, Media: MediaVFAT, UserDataMode: ModeReplace}, d: Defaults{Format: FormatNoCloud},
			want: Job{Action: ActionDetach, Format: FormatConfigDrive, Media: MediaVFAT, UserDataMode: ModeReplace}},
		{name: "agent's format", j: Job{}, d: Defaults{Format: FormatConfigDrive},
			want: Job{Action: ActionStart, Format: FormatConfigDrive, Media: MediaISO, UserDataMode: ModeMerge}},
		{name: "offline leaves guest_report as written", j: Job{GuestReport: &off}, report: &off},
		{name: "agent's guest_report fills it in", j: Job{}, d: agentOn, report: &on},
		{name: "agent's guest_report off", j: Job{}, d: agentOff},
		{name: "explicit false kept", j: Job{GuestReport: &off}, d: agentOn, report: &off},
		{name: "explicit true kept", j: Job{GuestReport: &on}, d: agentOff, report: &on},
		{name: "prebuilt gets it only when it asks", j: Job{PrebuiltImage: "/x.iso"}, d: agentOn},
		{name: "prebuilt asking", j: Job{PrebuiltImage: "/x.iso", GuestReport: &on}, d: agentOn, report: &on},
		{name: "detach never", j: Job{Action: ActionDetach, GuestReport: &on}, d: agentOn},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			orig := c.j
			got := c.j.Apply(c.d)
			if c.want.Action != "" {
				if !reflect.DeepEqual(got, c.want) {
					t.Errorf("Apply = %+v, want %+v", got, c.want)
				}
			}
			if (got.GuestReport == nil) != (c.report == nil) || got.GuestReport != nil && *got.GuestReport != *c.report {
				t.Errorf("guest_report %v, want %v", got.GuestReport, c.report)
			}
			if again := got.Apply(c.d); !reflect.DeepEqual(again, got) {
				t.Errorf("applying twice gives %+v, once %+v", again, got)
			}
			if !reflect.DeepEqual(c.j, orig) {
				t.Errorf("Apply changed the receiver")
			}
		})
	}
}

func TestReportForms(t *testing.T) {
	_, r := Parse([]byte(v1(`"hostname":"-h","id":"!"`)))
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"errors":[{"field":"id","code":"invalid","message":"\"!\" is not a valid job id: use 1-128 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit"},{"field":"hostname","code":"invalid","message":"\"-h\" is not a valid host name: labels of 1-63 letters, digits and hyphens (not at either end), separated by dots, at most 253 characters"}]}`
	if string(b) != want {
		t.Errorf("JSON report:\n%s\nwant\n%s", b, want)
	}
	text := r.Err().Error()
	if !strings.HasPrefix(text, "invalid job (2 problems):\n  id: \"!\" is not") || !strings.Contains(text, "\n  hostname: \"-h\" is not") {
		t.Errorf("text form: %q", text)
	}
	var ok Report
	if ok.Err() != nil || !ok.OK() {
		t.Error("empty report is not OK")
	}
	one := Report{Errors: []FieldError{{Code: CodeSyntax, Message: "bad"}}}
	if got := one.Err().Error(); got != "invalid job: bad" {
		t.Errorf("single: %q", got)
	}
}

func TestQuoteTruncates(t *testing.T) {
	long := strings.Repeat("é", 100)
	q := Quote(long)
	if !strings.HasSuffix(q, "…(200 bytes)") || !strings.HasPrefix(q, `"ééé`) {
		t.Errorf("quote = %q", q)
	}
	if strings.Contains(q, `\x`) {
		t.Errorf("cut inside a character: %q", q)
	}
}

func TestAliasBombIsFast(t *testing.T) {
	for _, s := range []string{aliasBomb("#cloud-config\n"), "version: 2\n" + aliasBomb("")} {
		start := time.Now()
		_, err := ParseYAMLMap(s)
		if err == nil || !strings.Contains(err.Error(), "excessive aliasing") {
			t.Errorf("alias bomb accepted: %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("took %v", d)
		}
	}
}

func TestHelpers(t *testing.T) {
	for s, want := range map[string]bool{"a": true, "a.b.c": true, "a-b.c": true, "a.": true, "": false, ".": false, "a-": false, "1.2.3.4": false, strings.Repeat("a.", 127) + "a": false} {
		if got := ValidHostname(s); got != want {
			t.Errorf("ValidHostname(%q) = %v", s, got)
		}
	}
	for s, want := range map[string]bool{"a": true, "a.b": true, "web1.user-data": true, "..": false, "a..b": false, ".a": false, "a/b": false, "": false} {
		if got := ValidSecretName(s); got != want {
			t.Errorf("ValidSecretName(%q) = %v", s, got)
		}
	}
	for s, want := range map[string]UserDataKind{
		"#cloud-config\n": KindCloudConfig, "#cloud-config-archive\n": KindArchive, "#!/bin/sh": KindScript,
		"#include\nhttp://x": KindInclude, "#include-once\n": KindIncludeOnce, "#cloud-boothook\n": KindBoothook,
		"#part-handler\n": KindPartHandler, "## Template: Jinja\n": KindJinja, "Content-Type: multipart/mixed": KindUnknown,
		"MIME-Version: 1.0\r\n": KindMultipart, "hello": KindUnknown, "": KindUnknown,
	} {
		if got := ClassifyUserData(s); got != want {
			t.Errorf("ClassifyUserData(%q) = %q, want %q", s, got, want)
		}
	}
	m, err := ParseYAMLMap("")
	if err != nil || len(m) != 0 {
		t.Errorf("empty YAML: %v %v", m, err)
	}
	m, err = ParseYAMLMap("#cloud-config\na: [1, x]\n")
	if err != nil || !reflect.DeepEqual(m, map[string]any{"a": []any{1, "x"}}) {
		t.Errorf("YAML map: %#v %v", m, err)
	}
}

// FuzzParse checks that Parse never panics, that every problem has a code
// and a message, and that a clean job survives re-encoding.
func FuzzParse(f *testing.F) {
	for _, tc := range badCases() {
		if len(tc.doc) < 4096 {
			f.Add([]byte(tc.doc))
		}
	}
	f.Add([]byte(fullJob()))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, r := Parse(data)
		for _, e := range r.Errors {
			if e.Code == "" || e.Message == "" {
				t.Fatalf("problem without code or message: %+v", e)
			}
			if !knownCodes[e.Code] {
				t.Fatalf("unknown code %q", e.Code)
			}
		}
		if !r.OK() {
			return
		}
		if j == nil {
			t.Fatal("clean report without a job")
		}
		roundTrip(t, j)
	})
}

var knownCodes = map[string]bool{
	CodeSyntax: true, CodeEncoding: true, CodeTooLarge: true, CodeTooDeep: true, CodeType: true,
	CodeUnknownField: true, CodeDuplicateKey: true, CodeRequired: true, CodeInvalid: true,
	CodeOutOfRange: true, CodeConflict: true, CodeDuplicate: true, CodeNotFound: true, CodeUnsupported: true,
}

func TestFuzzCorpusPresent(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzParse/*")
	if err != nil || len(files) < 5 {
		t.Fatalf("seed corpus: %d files, %v", len(files), err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.HasPrefix(b, []byte("go test fuzz v1\n")) {
			t.Errorf("%s is not a fuzz corpus file", f)
		}
	}
}

func TestMultipartUserDataMustSplit(t *testing.T) {
	for name, ud := range map[string]string{
		"empty boundary": "Content-Type: multipart/mixed; boundary=\"\"\nMIME-Version: 1.0\n\n--x\n",
		"no parts":       "Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n",
		"not multipart":  "Content-Type: text/plain; boundary=\"b\"\n\n--b\n\nx\n--b--\n",
	} {
		_, r := Parse([]byte(`{"version":1,"user_data":` + strconv.Quote(ud) + `}`))
		if len(r.Errors) != 1 || r.Errors[0].Field != "user_data" || r.Errors[0].Code != CodeInvalid {
			t.Errorf("%s: %+v", name, r.Errors)
		}
	}
	ok := "Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/cloud-config\n\n#cloud-config\n{}\n--b--\n"
	if _, r := Parse([]byte(`{"version":1,"user_data":` + strconv.Quote(ok) + `}`)); !r.OK() {
		t.Errorf("valid multipart refused: %v", r.Err())
	}
}
