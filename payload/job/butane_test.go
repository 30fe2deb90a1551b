package job

import (
	"encoding/json"
	"strings"
	"testing"

	ignerrors "github.com/coreos/ignition/v2/config/shared/errors"

	"github.com/vmpayload/vmpayload/payload/internal/butane"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// bu is a job of format ignition whose butane field is the YAML text src,
// with more members.
func bu(src, more string) string {
	b, _ := json.Marshal(src)
	doc := `{"version":1,"format":"ignition","butane":` + string(b)
	if more != "" {
		doc += "," + more
	}
	return doc + "}"
}

// TestButaneValidation: a butane field is translated with Butane's
// library when the job is validated; what Butane refuses or warns about is
// refused under the field butane with Butane's message, the YAML path it
// names and the line and column in the text; a variant or version not
// accepted is unsupported.
func TestButaneValidation(t *testing.T) {
	const head = "variant: fcos\nversion: 1.6.0\n"
	for _, c := range []struct {
		name, doc string
		want      []string // field|code, in order
		msg       []string // in the first problem's message
	}{
		{name: "fcos 1.6.0", doc: bu(head+"passwd:\n  users:\n    - name: core\n      ssh_authorized_keys: ["+testenv.KeyAlice+"]\n", "")},
		{name: "fcos 1.7.0 (Ignition 3.6.0)", doc: bu("variant: fcos\nversion: 1.7.0\n", "")},
		{name: "flatcar 1.1.0", doc: bu("variant: flatcar\nversion: 1.1.0\nstorage:\n  files:\n    - path: /etc/x\n      contents:\n        inline: x\n", "")},
		{name: "fcos 1.0.0", doc: bu("variant: fcos\nversion: 1.0.0\n", "")},
		{name: "variant by alias", doc: bu("x-variant: &v fcos\nvariant: *v\nversion: 1.6.0\n", ""), want: []string{"butane|invalid"}, msg: []string{"unused key x-variant"}},
		{name: "variant a list", doc: bu("variant: [fcos]\nversion: 1.6.0\n", ""), want: []string{"butane|unsupported"}, msg: []string{"(at $.variant, line 1, column 10): the variant is a sequence, not a string"}},

		{name: "YAML syntax error", doc: bu(head+"storage: [\n", ""), want: []string{"butane|invalid"},
			msg: []string{"Butane refuses the config: not valid YAML: yaml: line 3: did not find expected node content"}},
		{name: "wrong YAML type", doc: bu(head+"storage:\n  files:\n    - path: /etc/x\n      mode: rw\n", ""), want: []string{"butane|invalid"},
			msg: []string{"line 6: cannot unmarshal !!str `rw` into int"}},
		{name: "not a mapping", doc: bu("- variant: fcos\n", ""), want: []string{"butane|invalid"}, msg: []string{"(line 1, column 1)", "a YAML mapping"}},
		{name: "no variant", doc: bu("version: 1.6.0\n", ""), want: []string{"butane|invalid"}, msg: []string{"(at $.variant): the config names no variant"}},
		{name: "unknown variant", doc: bu("variant: coreos\nversion: 1.6.0\n", ""), want: []string{"butane|unsupported"},
			msg: []string{`(at $.variant, line 1, column 10): variant "coreos" is not accepted; give one of "fcos", "fiot", "flatcar", "r4e"`}},
		{name: "openshift", doc: bu("variant: openshift\nversion: 4.22.0\n", ""), want: []string{"butane|unsupported"}, msg: []string{"butane --raw"}},
		{name: "invalid version", doc: bu("variant: fcos\nversion: one\n", ""), want: []string{"butane|unsupported"},
			msg: []string{`(at $.version, line 2, column 10): version "one" is not a semantic version`}},
		{name: "unknown version", doc: bu("variant: flatcar\nversion: 1.6.0\n", ""), want: []string{"butane|unsupported"},
			msg: []string{"(at $.version, line 2, column 10): variant flatcar has no version 1.6.0; give one of 1.0.0, 1.1.0"}},
		{name: "experimental version", doc: bu("variant: fcos\nversion: 1.8.0-experimental\n", ""), want: []string{"butane|unsupported"}, msg: []string{"is experimental"}},
		{name: "local file", doc: bu(head+"storage:\n  files:\n    - path: /etc/x\n      contents:\n        local: x.txt\n", ""), want: []string{"butane|invalid"},
			msg: []string{"(at $.storage.files.0.contents.local, line 7, column 16): ", butane.MsgNoFilesDir}},
		{name: "local tree", doc: bu(head+"storage:\n  trees:\n    - local: etc\n", ""), want: []string{"butane|invalid"}, msg: []string{"$.storage.trees.0", "files directory"}},
		{name: "local ssh keys", doc: bu(head+"passwd:\n  users:\n    - name: core\n      ssh_authorized_keys_local: [id.pub]\n", ""), want: []string{"butane|invalid"},
			msg: []string{"$.passwd.users.0.ssh_authorized_keys_local", "files directory"}},
		{name: "relative path", doc: bu(head+"storage:\n  files:\n    - path: etc/x\n", ""), want: []string{"butane|invalid"},
			msg: []string{"(at $.storage.files.0.path, line 5, column 13): " + ignerrors.ErrPathRelative.Error()}},
		{name: "unused key is a warning, refused", doc: bu(head+"storage:\n  fils: []\n", ""), want: []string{"butane|invalid"},
			msg: []string{"Butane warns about the config (at $.storage.fils, line 4, column 3): unused key fils (a warning is refused, as by butane --strict)"}},
		{name: "decimal mode warns", doc: bu(head+"storage:\n  files:\n    - path: /etc/x\n      mode: 644\n", ""), want: []string{"butane|invalid", "butane|invalid"},
			msg: []string{"$.storage.files.0.mode", "octal"}},
		{name: "errors before warnings", doc: bu(head+"foo: 1\nstorage:\n  files:\n    - path: etc/x\n", ""), want: []string{"butane|invalid", "butane|invalid"},
			msg: []string{"Butane refuses the config (at $.storage.files.0.path"}},

		{name: "butane and ignition", doc: bu(head, `"ignition":{"ignition":{"version":"3.0.0"}}`), want: []string{"butane|conflict"}, msg: []string{"use only one of butane and ignition"}},
		{name: "butane and ignition_base64", doc: bu(head, `"ignition_base64":"e30="`), want: []string{"butane|conflict"}, msg: []string{"use only one of butane and ignition_base64"}},
		{name: "butane without the format", doc: v1(`"butane":"variant: fcos\nversion: 1.6.0\n"`), want: []string{"butane|conflict"}, msg: []string{`butane is only used with format "ignition"`}},
		{name: "butane with a prebuilt image", doc: bu(head, `"prebuilt_image":"/var/lib/x.iso"`), want: []string{"prebuilt_image|conflict", "prebuilt_image|conflict"}},
	} {
		t.Run(c.name, func(t *testing.T) { wantProblems(t, c.doc, c.want, c.msg...) })
	}
}

// wantProblems parses doc and fails t unless its problems are want
// ("field|code", in order) and the first one's message says each of msgs
// (an empty one says nothing).
func wantProblems(t *testing.T, doc string, want []string, msgs ...string) {
	t.Helper()
	_, r := Parse([]byte(doc))
	var got []string
	for _, e := range r.Errors {
		got = append(got, e.Field+"|"+e.Code)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("problems %v, want %v (%v)", got, want, r.Err())
	}
	for _, m := range msgs {
		if m != "" && !strings.Contains(r.Errors[0].Message, m) {
			t.Errorf("message %q does not say %q", r.Errors[0].Message, m)
		}
	}
}

// TestButaneUserConfig: IgnitionUserConfig gives the Ignition config
// Butane translates a butane field to, of the spec Butane's version
// produces, from the field butane.
func TestButaneUserConfig(t *testing.T) {
	for src, spec := range map[string]string{
		"variant: fcos\nversion: 1.6.0\n":    "3.5.0",
		"variant: fcos\nversion: 1.7.0\n":    "3.6.0",
		"variant: flatcar\nversion: 1.0.0\n": "3.3.0",
		"variant: r4e\nversion: 1.1.0\n":     "3.4.0",
	} {
		j, r := Parse([]byte(bu(src, "")))
		if !r.OK() {
			t.Fatalf("%q: %v", src, r.Err())
		}
		raw, field, err := IgnitionUserConfig(j)
		if err != nil || field != "butane" || !strings.Contains(string(raw), `"version":"`+spec+`"`) {
			t.Errorf("%q: %s from %q: %v", src, raw, field, err)
		}
	}
	j := &Job{Version: 1, Format: FormatIgnition, Butane: "variant: fcos\nversion: 9.0.0\n"}
	if _, field, err := IgnitionUserConfig(j); err == nil || field != "butane" || !strings.Contains(err.Error(), "no version 9.0.0") {
		t.Errorf("bad butane: %q %v", field, err)
	}
}
