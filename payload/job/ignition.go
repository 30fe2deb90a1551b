package job

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	ignutil "github.com/coreos/ignition/v2/config/util"

	"github.com/vmpayload/vmpayload/payload/internal/butane"
	"github.com/vmpayload/vmpayload/payload/internal/ignconvert"
)

// The paths the generated Ignition config writes for fields other than
// files; a job file at one of them is refused (Ignition refuses a config
// that writes a path twice).
const (
	IgnitionHostnamePath  = "/etc/hostname"
	IgnitionLocaltimePath = "/etc/localtime"
	IgnitionZoneinfoDir   = "/usr/share/zoneinfo/"
)

// IgnitionHostKeyPaths returns the private and public key paths of an SSH
// host key of type typ, where OpenSSH's sshd looks for them.
func IgnitionHostKeyPaths(typ string) (private, public string) {
	p := "/etc/ssh/ssh_host_" + typ + "_key"
	return p, p + ".pub"
}

// IgnitionSudoersPath is the sudoers drop-in that carries a user's sudo
// rule in an Ignition config.
func IgnitionSudoersPath(user string) string { return "/etc/sudoers.d/90-vmpayload-" + user }

// IgnitionUserConfig returns the JSON text of the user's own Ignition
// config (ignition, ignition_base64, or butane translated by Butane) and
// the field it came from; nil when the job has none.
func IgnitionUserConfig(j *Job) (raw []byte, field string, err error) {
	switch {
	case j.Butane != "":
		b, problems := TranslateButane(j.Butane)
		if len(problems) > 0 {
			return nil, "butane", (&Report{Errors: problems}).Err()
		}
		return b, "butane", nil
	case j.Ignition != nil:
		b, err := json.Marshal(j.Ignition)
		if err != nil {
			return nil, "ignition", fmt.Errorf("the config cannot be encoded as JSON: %w", err)
		}
		b, err = convertSpec2(b)
		return b, "ignition", err
	case j.IgnitionBase64 != "":
		b, err := base64.StdEncoding.DecodeString(j.IgnitionBase64)
		if err != nil {
			return nil, "ignition_base64", fmt.Errorf("%s is not valid base64: %w", Quote(j.IgnitionBase64), err)
		}
		b, err = convertSpec2(b)
		return b, "ignition_base64", err
	}
	return nil, "", nil
}

// convertSpec2 returns raw, or, when raw is an Ignition spec 2.x config
// (Container Linux Config / ct output, Ignition v0.x), its conversion to
// spec 3.1.0 the way Flatcar's Ignition converts it (package
// payload/internal/ignconvert: Ignition v0.x's parser and
// github.com/coreos/ign-converter's translate/v24tov31). The converted
// config is what is checked with config.Parse and merged.
func convertSpec2(raw []byte) ([]byte, error) {
	v, _, err := ignutil.GetConfigVersion(raw)
	if err != nil || v.Major != 2 {
		return raw, nil
	}
	out, err := ignconvert.Convert(raw)
	if err != nil {
		return nil, fmt.Errorf("the config is Ignition spec %s, which is converted to spec 3 with %s: %w", v, ignconvert.Tool, err)
	}
	return out, nil
}

// TranslateButane translates src, a job's butane field, into its Ignition
// config (JSON) with Butane's library (package payload/internal/butane),
// or returns what Butane refuses and warns about, each as a problem of
// field butane with Butane's message, the YAML path it names and its line
// and column. A warning is refused too, as `butane --strict` does: it
// names something Butane would translate in a way the author likely did
// not mean (a key it ignores, a mode written in decimal).
//
// A config over the YAML limits (MaxYAMLBytes, MaxYAMLTokens) is refused
// before Butane parses it.
//
// The last translation is kept: a check translates a config once, though
// both validation and the render input need it. The result is read-only.
func TranslateButane(src string) ([]byte, []FieldError) {
	lastButane.Lock()
	defer lastButane.Unlock()
	if lastButane.src != src || lastButane.out == nil && lastButane.problems == nil {
		lastButane.out, lastButane.problems = translateButane(src)
		lastButane.src = src
	}
	return lastButane.out, lastButane.problems
}

// lastButane is TranslateButane's last translation.
var lastButane struct {
	sync.Mutex
	src      string
	out      []byte
	problems []FieldError
}

func translateButane(src string) ([]byte, []FieldError) {
	if err := checkYAMLSize(src); err != nil {
		return nil, []FieldError{{Field: "butane", Code: CodeTooLarge, Message: "the Butane config is refused: " + err.Error()}}
	}
	out, _, problems := butane.Translate([]byte(src))
	var errs []FieldError
	for _, p := range problems {
		code, what, why := CodeInvalid, "Butane refuses the config", ""
		switch {
		case p.Unsupported:
			code = CodeUnsupported
		case p.Warning:
			what, why = "Butane warns about the config", " (a warning is refused, as by butane --strict)"
		}
		errs = append(errs, FieldError{Field: "butane", Code: code, Message: what + sep(p.String()) + p.String() + why})
	}
	return out, errs
}

// sep is the separator between "Butane refuses the config" and a
// problem: a space before "(at …): …", ": " before a bare message.
func sep(s string) string {
	if strings.HasPrefix(s, "(") {
		return " "
	}
	return ": "
}
