package job

import (
	"bytes"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestClassifyAsCloudInit: cloud-init lower-cases and left-strips the text
// before matching prefixes, longest first, and reads anything with
// "mime-version:" in its first 4096 bytes as MIME.
func TestClassifyAsCloudInit(t *testing.T) {
	for in, want := range map[string]UserDataKind{
		"#cloud-config\n":                     KindCloudConfig,
		"  \n#Cloud-Config\na: 1\n":           KindCloudConfig,
		"#cloud-config-archive\n- a\n":        KindArchive,
		"#cloud-config-jsonp\n[]\n":           KindJSONP,
		"#include-once\nhttp://x\n":           KindIncludeOnce,
		"#INCLUDE\nhttp://x\n":                KindInclude,
		"#!/bin/sh\n":                         KindScript,
		"## Template: Jinja\n#cloud-config\n": KindJinja,
		"From nobody Mon Jan 1 00:00:00 2024\nContent-Type: text/plain\nMIME-Version: 1.0\n\n#cloud-config\n": KindMultipart,
		"#cloud-config\n# mime-version: in a comment\n":                                                       KindMultipart,
		"Content-Type: multipart/mixed; boundary=x\n\n--x--\n":                                                KindUnknown,
		"#cloud-config\n" + strings.Repeat("#\n", 2100) + "MIME-Version: 1.0\n":                               KindCloudConfig,
		"hello\n": KindUnknown,
		// case, non-ASCII text and the 4096-byte MIME window (counted in bytes)
		"#cloud-conf\n":           KindUnknown,
		"#cloud-configü\n":        KindCloudConfig,
		"#clöud-config\n":         KindUnknown,
		"\u212a#cloud-config\n":   KindUnknown, // KELVIN SIGN lowers to "k"
		"\xff\xfe#cloud-config\n": KindUnknown,
		"#cloud-config\xff\n":     KindCloudConfig,
		"Content-Type: multipart/mixed\nMiMe-VeRsIoN: 1.0\n":           KindMultipart,
		strings.Repeat("x", mimeSniffBytes-13) + "MIME-Version:":       KindMultipart,
		strings.Repeat("x", mimeSniffBytes-12) + "MIME-Version:":       KindUnknown,
		"ü" + strings.Repeat("x", mimeSniffBytes-15) + "MIME-Version:": KindMultipart,
		// the start is looked for in the first 64+4096 bytes
		strings.Repeat("\n", 4150) + "#!/bin/sh\n":    KindScript,
		strings.Repeat(" ", 5000) + "#cloud-config\n": KindUnknown,
	} {
		if got := ClassifyUserData(in); got != want {
			t.Errorf("ClassifyUserData(%.60q) = %q, want %q", in, got, want)
		}
	}
}

func TestGunzipBounded(t *testing.T) {
	text, zipped, err := Gunzip(testenv.Gzip(t, "#cloud-config\na: 1\n"), 100)
	if err != nil || !zipped || string(text) != "#cloud-config\na: 1\n" {
		t.Fatalf("Gunzip = %q, %v, %v", text, zipped, err)
	}
	if text, zipped, err := Gunzip([]byte("#!/bin/sh\n"), 100); err != nil || zipped || string(text) != "#!/bin/sh\n" {
		t.Fatalf("plain text: %q %v %v", text, zipped, err)
	}
	if _, _, err := Gunzip(testenv.Gzip(t, strings.Repeat("x", 101)), 100); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("101 bytes with limit 100: %v", err)
	}
	if _, _, err := Gunzip([]byte{0x1f, 0x8b, 1, 2, 3}, 100); err == nil {
		t.Fatal("a broken gzip stream was accepted")
	}
}

// TestGzipUserDataFields: gzip content comes in through the base64 fields,
// is checked as the text it decompresses to, and a bomb is a field-named
// too_large error.
func TestGzipUserDataFields(t *testing.T) {
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	bomb := testenv.Gzip(t, "#cloud-config\n#"+strings.Repeat("A", MaxContentBytes))
	for _, c := range []struct {
		name string
		job  Job
		want string // "" = valid, else "field|code"
	}{
		{"gzip cloud-config", Job{Version: 1, UserDataBase64: b64(testenv.Gzip(t, "#cloud-config\nssh_pwauth: yes\n"))}, ""},
		{"gzip vendor-data", Job{Version: 1, VendorDataBase64: b64(testenv.Gzip(t, "#cloud-config\nntp: {enabled: true}\n"))}, ""},
		{"gzip of unknown text", Job{Version: 1, UserDataBase64: b64(testenv.Gzip(t, "hello\n"))}, "user_data_base64|invalid"},
		{"gzip bomb", Job{Version: 1, UserDataBase64: b64(bomb)}, "user_data_base64|too_large"},
		{"vendor bomb", Job{Version: 1, VendorDataBase64: b64(bomb)}, "vendor_data_base64|too_large"},
		{"broken gzip", Job{Version: 1, UserDataBase64: b64([]byte{0x1f, 0x8b, 0, 0})}, "user_data_base64|invalid"},
		{"runcmd string against the job's runcmd", Job{Version: 1, Runcmd: []Command{{Shell: "echo"}}, UserData: "#cloud-config\nruncmd: echo x\n"}, "user_data|conflict"},
		{"runcmd string in gzip base64", Job{Version: 1, Runcmd: []Command{{Shell: "echo"}}, UserDataBase64: b64(testenv.Gzip(t, "#cloud-config\nruncmd: echo x\n"))}, "user_data|conflict"},
		{"runcmd string in replace mode", Job{Version: 1, UserDataMode: ModeReplace, UserData: "#cloud-config\nruncmd: echo x\n"}, ""},
		{"both vendor fields", Job{Version: 1, VendorData: "#!/bin/sh\n", VendorDataBase64: b64([]byte("#!/bin/sh\n"))}, "vendor_data|conflict"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.job.Validate()
			var got []string
			for _, e := range r.Errors {
				got = append(got, e.Field+"|"+e.Code)
			}
			if c.want == "" && len(got) > 0 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
				t.Fatalf("errors %v, want [%s]", r.Errors, c.want)
			}
		})
	}
}

func TestSplitMIME(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		parts     []string // part bodies; nil = error
	}{
		{"multipart", "Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/cloud-config\n\n#cloud-config\na: 1\n--b\nContent-Type: text/x-shellscript\n\n#!/bin/sh\n--b--\n",
			[]string{"#cloud-config\na: 1", "#!/bin/sh"}},
		{"mbox From line first", "From nobody Mon Jan  1 00:00:00 2024\nContent-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/cloud-config\n\n#cloud-config\n--b--\n",
			[]string{"#cloud-config"}},
		{"single part message", "MIME-Version: 1.0\nContent-Type: text/cloud-config\n\n#cloud-config\nb: 2\n", []string{"#cloud-config\nb: 2\n"}},
		{"folded header", "MIME-Version: 1.0\nContent-Type: multipart/mixed;\n boundary=\"b\"\n\n--b\n\n#!/bin/sh\n--b--\n", []string{"#!/bin/sh"}},
		{"no boundary", "MIME-Version: 1.0\nContent-Type: multipart/mixed\n\nx", nil},
		{"no parts", "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=Q\n\nno parts", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			parts, err := SplitMIME(c.doc)
			if c.parts == nil {
				if err == nil {
					t.Fatalf("accepted: %+v", parts)
				}
				return
			}
			if err != nil || len(parts) != len(c.parts) {
				t.Fatalf("SplitMIME: %d parts, %v", len(parts), err)
			}
			for i, p := range parts {
				if strings.TrimRight(string(p.Body), "\n") != strings.TrimRight(c.parts[i], "\n") {
					t.Errorf("part %d = %q, want %q", i, p.Body, c.parts[i])
				}
			}
		})
	}
}

// TestDuplicateKeysLastWins: PyYAML keeps the last value of a repeated key.
func TestDuplicateKeysLastWins(t *testing.T) {
	m, err := ParseYAMLMap("#cloud-config\na: 1\nb: {x: 1, x: 2}\na: 3\n")
	if err != nil {
		t.Fatal(err)
	}
	if m["a"] != 3 || m["b"].(map[string]any)["x"] != 2 {
		t.Fatalf("got %v", m)
	}
	_, dups, err := LoadYAMLMapping("a: 1\nb: {x: 1, x: 2}\na: 3\n")
	if err != nil || strings.Join(dups, ",") != "a,b.x" {
		t.Fatalf("dups %v, %v", dups, err)
	}
	j := Job{Version: 1, UserData: "#cloud-config\napt: {a: 1}\napt: {b: 2}\n"}
	if r := j.Validate(); !r.OK() {
		t.Fatalf("duplicate keys refused: %v", r.Errors)
	}
}

// FuzzSplitMIME reads arbitrary MIME user-data: SplitMIME must not
// panic, and what it splits must survive JoinMultipart and a second split
// with the same bodies.
func FuzzSplitMIME(f *testing.F) {
	f.Add("Content-Type: multipart/mixed; boundary=\"b\"\nMIME-Version: 1.0\n\n--b\nContent-Type: text/cloud-config\n\n#cloud-config\na: 1\n--b\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho hi\n--b--\n")
	f.Add("Content-Type: multipart/mixed; boundary=\"\"\n\n--\n")
	f.Add("Content-Type: multipart/mixed; boundary=Q\n\nno parts")
	f.Add("MIME-Version: 1.0\n\n")
	f.Fuzz(func(t *testing.T, doc string) {
		parts, err := SplitMIME(doc)
		if err != nil {
			return
		}
		if len(parts) == 0 {
			t.Fatal("no parts and no error")
		}
		const boundary = "vmpayload-fuzz-boundary-7c1d"
		for _, p := range parts {
			if bytes.Contains(p.Body, []byte(boundary)) {
				return
			}
			for k, vs := range p.Header {
				for _, v := range vs {
					badName := strings.IndexFunc(k, func(r rune) bool { return !strings.ContainsRune(tokenChars, r) }) >= 0
					if badName || strings.IndexFunc(v, func(r rune) bool { return r != '\t' && (r < 0x20 || r >= 0x7f) }) >= 0 {
						// not representable as a header line Go's reader
						// accepts (Python's, cloud-init's, is more lenient)
						return
					}
				}
			}
		}
		joined, err := JoinMultipart(parts, boundary)
		if err != nil {
			t.Fatalf("JoinMultipart of split parts: %v", err)
		}
		again, err := SplitMIME(string(joined))
		if err != nil {
			t.Fatalf("re-split: %v\n%q", err, joined)
		}
		if len(again) != len(parts) {
			t.Fatalf("re-split gave %d parts, want %d", len(again), len(parts))
		}
		for i := range parts {
			if !bytes.Equal(bytes.TrimRight(again[i].Body, "\r\n"), bytes.TrimRight(parts[i].Body, "\r\n")) {
				t.Fatalf("part %d body changed: %q -> %q", i, parts[i].Body, again[i].Body)
			}
		}
	})
}

func TestMetaDataSpellings(t *testing.T) {
	md := map[string]any{"instance-id": "i-1", "local-hostname": "h1", "public-keys": []any{"ssh-ed25519 AAAA x"}, "other": 1}
	cd := MetaDataFor(FormatConfigDrive, md)
	if cd["uuid"] != "i-1" || cd["hostname"] != "h1" || !reflect.DeepEqual(cd["public_keys"], md["public-keys"]) || cd["other"] != 1 || cd["instance-id"] != "i-1" {
		t.Errorf("config-drive meta_data %v", cd)
	}
	os := map[string]any{"uuid": "u-1", "hostname": "h2", "public_keys": map[string]any{"k": "ssh-ed25519 AAAA x"}}
	nc := MetaDataFor(FormatNoCloud, os)
	if nc["instance-id"] != "u-1" || nc["local-hostname"] != "h2" || !reflect.DeepEqual(nc["public-keys"], os["public_keys"]) {
		t.Errorf("nocloud meta-data %v", nc)
	}
	if len(md) != 4 || len(os) != 3 {
		t.Error("input modified")
	}
	for _, c := range []struct {
		md   map[string]any
		want string
	}{
		{map[string]any{"instance-id": "a", "uuid": "b"}, "meta_data.uuid|conflict"},
		{map[string]any{"local-hostname": "a", "hostname": "b"}, "meta_data.hostname|conflict"},
		{map[string]any{"public-keys": []any{"a"}, "public_keys": []any{"b"}}, "meta_data.public_keys|conflict"},
		{map[string]any{"uuid": map[string]any{}}, "meta_data.uuid|invalid"},
		{map[string]any{"instance-id": "a", "uuid": "a", "hostname": "h", "local-hostname": "h"}, ""},
	} {
		j := Job{Version: 1, MetaData: c.md}
		r := j.Validate()
		var got []string
		for _, e := range r.Errors {
			got = append(got, e.Field+"|"+e.Code)
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("%v: errors %v, want %s", c.md, r.Errors, c.want)
		}
	}
}

// tokenChars are the characters of an HTTP/MIME header name Go's reader
// accepts (RFC 7230 token).
const tokenChars = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
