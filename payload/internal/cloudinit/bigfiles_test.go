package cloudinit

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestBigContentsSpliced(t *testing.T) {
	lim := PlainContentLimit
	bin := bytes.Repeat([]byte{0, 1, 2, '"', '\\', 0xff}, lim/6+1)
	for _, tc := range []struct {
		name     string
		content  string
		encoding string
		want     []byte // the decoded bytes
		b64      bool   // written base64
	}{
		{"small text", "hello\n", "", []byte("hello\n"), false},
		{"text one below the limit", strings.Repeat("a", lim-1), "", []byte(strings.Repeat("a", lim-1)), false},
		{"text at the limit", strings.Repeat("\"q\"\n", lim/4), "", []byte(strings.Repeat("\"q\"\n", lim/4)), true},
		{"big base64 from the job", base64.StdEncoding.EncodeToString(bin), "b64", bin, true},
		{"small base64 from the job", base64.StdEncoding.EncodeToString(bin[:10]), "b64", bin[:10], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := &CloudConfig{Hostname: "h", WriteFiles: []WriteFile{
				{Path: "/a", Content: tc.content, Encoding: tc.encoding},
				{Path: "/b", Content: "after\n"},
			}}
			big := detachBigContents(cc, strings.Repeat("ab", 32))
			doc, err := cloudConfigDoc(cc)
			if err != nil {
				t.Fatal(err)
			}
			if doc, err = big.splice(doc); err != nil {
				t.Fatal(err)
			}
			var got CloudConfig
			if err := yaml.Unmarshal(doc, &got); err != nil {
				t.Fatalf("the spliced document is not YAML: %v\n%.300s", err, doc)
			}
			if len(got.WriteFiles) != 2 || got.WriteFiles[1].Content != "after\n" {
				t.Fatalf("write_files %+v", got.WriteFiles)
			}
			wf := got.WriteFiles[0]
			data := []byte(wf.Content)
			if wf.Encoding == "b64" {
				if data, err = base64.StdEncoding.DecodeString(wf.Content); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(data, tc.want) || (wf.Encoding == "b64") != tc.b64 {
				t.Errorf("encoding %q, %d bytes; want b64=%v and the %d bytes", wf.Encoding, len(data), tc.b64, len(tc.want))
			}
		})
	}
}

func TestBigContentsPlaceholderNotUnique(t *testing.T) {
	cc := &CloudConfig{WriteFiles: []WriteFile{{Path: "/a", Content: strings.Repeat("x", PlainContentLimit)}}}
	big := detachBigContents(cc, "k")
	doc, err := cloudConfigDoc(cc)
	if err != nil {
		t.Fatal(err)
	}
	twice := append(append([]byte{}, doc...), []byte("runcmd: ["+cc.WriteFiles[0].Content+"]\n")...)
	if _, err := big.splice(twice); err == nil || !strings.Contains(err.Error(), "not unique") {
		t.Errorf("a placeholder found twice: %v", err)
	}
	if _, err := big.splice(bytes.Replace(doc, []byte(cc.WriteFiles[0].Content), nil, 1)); err != nil {
		t.Errorf("a placeholder dropped (by a user_data merge) must be fine: %v", err)
	}
}

// TestSpliceManyContents splices a few and many big contents, some given as
// base64 by the job, and compares the result with each placeholder replaced
// by its base64 text in quotes.
func TestSpliceManyContents(t *testing.T) {
	for _, count := range []int{3, 120} {
		cc := &CloudConfig{Hostname: "h"}
		var want []string // quoted base64 by file
		for i := range count {
			raw := bytes.Repeat([]byte{byte(i), '\n', 0xfe, 'x', byte(i * 7)}, (PlainContentLimit+i*97)/5+1)
			enc := base64.StdEncoding.EncodeToString(raw)
			wf := WriteFile{Path: fmt.Sprintf("/f%d", i), Content: string(raw)}
			if i%3 == 1 {
				wf.Content, wf.Encoding = enc, "b64"
			}
			cc.WriteFiles = append(cc.WriteFiles, wf, WriteFile{Path: fmt.Sprintf("/small%d", i), Content: "s\n"})
			want = append(want, `"`+enc+`"`)
		}
		big := detachBigContents(cc, "k")
		if got := len(big.contents); got != count {
			t.Fatalf("%d files: %d detached", count, got)
		}
		doc, err := cloudConfigDoc(cc)
		if err != nil {
			t.Fatal(err)
		}
		expect := doc
		for i := range count {
			ph := []byte(fmt.Sprintf("%s%0*d", big.prefix, placeholderDigits, i))
			if bytes.Count(expect, ph) != 1 {
				t.Fatalf("placeholder %d found %d times", i, bytes.Count(expect, ph))
			}
			expect = bytes.Replace(expect, ph, []byte(want[i]), 1)
		}
		got, err := big.splice(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, expect) {
			t.Errorf("%d files: the spliced document (%d bytes) differs from the reference (%d bytes)", count, len(got), len(expect))
		}
	}
}
