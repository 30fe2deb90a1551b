package job

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/coreos/go-semver/semver"
	ignconfig "github.com/coreos/ignition/v2/config"
	ignerrors "github.com/coreos/ignition/v2/config/shared/errors"
	ignutil "github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/vcontext/report"

	"github.com/vmpayload/vmpayload/payload/internal/butane"
	"github.com/vmpayload/vmpayload/payload/internal/ignconvert"
)

// The stable Ignition specs a user's config may use: Ignition v2.26.0
// parses 3.0.0 to 3.6.0 as stable; 3.7.0-experimental is refused, since
// other Ignition releases refuse an experimental spec.
var (
	MinIgnitionSpec = semver.Version{Major: 3, Minor: 0}
	MaxIgnitionSpec = semver.Version{Major: 3, Minor: 6}
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
			return nil, "ignition_base64", fmt.Errorf("%s is not valid base64: %w", quote(j.IgnitionBase64), err)
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

// CheckIgnitionConfig checks raw, a user's Ignition config given in field,
// the way the guest's Ignition reads it (config.Parse of Ignition
// v2.26.0): every error Ignition reports is a problem, and so is every
// warning (a key Ignition does not know, which it would ignore), each with
// Ignition's message and the JSON path it names. Only stable specs
// 3.0.0-3.6.0 are accepted.
func CheckIgnitionConfig(field string, raw []byte) []FieldError {
	var out []FieldError
	v, rpt, err := ignutil.GetConfigVersion(raw)
	if err == nil {
		switch {
		case v.PreRelease != "":
			return []FieldError{{Field: ignitionPath(field, []any{"ignition", "version"}), Code: CodeUnsupported,
				Message: fmt.Sprintf("Ignition spec %s is experimental (other Ignition releases refuse it); use a stable spec from %s to %s", v, MinIgnitionSpec, MaxIgnitionSpec)}}
		case v.LessThan(MinIgnitionSpec) || MaxIgnitionSpec.LessThan(v):
			return []FieldError{{Field: ignitionPath(field, []any{"ignition", "version"}), Code: CodeUnsupported,
				Message: fmt.Sprintf("Ignition spec %s is not supported; use a stable spec from %s to %s", v, MinIgnitionSpec, MaxIgnitionSpec)}}
		}
		_, rpt, err = ignconfig.Parse(raw)
	}
	for _, e := range rpt.Entries {
		f := ignitionPath(field, e.Context.Path)
		at := ""
		if f == field && len(e.Context.Path) > 0 {
			at = " (at " + jsonPath(e.Context.Path) + ")"
		} else if f == field && field != "ignition" && e.Marker.StartP != nil && e.Marker.StartP.Index > 0 {
			// the text as given: where Ignition's JSON decoder stopped in
			// it (the offset counts the offending byte)
			line, col := lineCol(raw, e.Marker.StartP.Index-1)
			at = fmt.Sprintf(" (line %d, column %d)", line, col)
		}
		switch e.Kind {
		case report.Error:
			out = append(out, FieldError{Field: f, Code: CodeInvalid, Message: "Ignition refuses the config" + at + ": " + e.Message})
		case report.Warn:
			out = append(out, FieldError{Field: f, Code: CodeInvalid, Message: "Ignition would ignore this" + at + ": " + e.Message})
		}
	}
	if err != nil && len(out) == 0 {
		code := CodeInvalid
		if errors.Is(err, ignerrors.ErrUnknownVersion) || errors.Is(err, ignerrors.ErrInvalidVersion) {
			code = CodeUnsupported
		}
		out = append(out, FieldError{Field: field, Code: code, Message: "Ignition refuses the config: " + err.Error()})
	}
	return out
}

// ignitionPath is the job path of the element at p (an Ignition report
// path: object keys and array indexes) inside the config given in field.
// A config given as base64 text has no job path inside it: the path goes
// into the message instead (see CheckIgnitionConfig), so field is returned.
func ignitionPath(field string, p []any) string {
	if field != "ignition" {
		return field
	}
	out := field
	for _, e := range p {
		switch t := e.(type) {
		case int:
			out = index(out, t)
		case string:
			out = join(out, t)
		default:
			out = join(out, fmt.Sprint(t))
		}
	}
	return out
}

// jsonPath renders an Ignition report path as "$.storage.files.0.path",
// for messages about a config given as text.
func jsonPath(p []any) string {
	var b strings.Builder
	b.WriteString("$")
	for _, e := range p {
		b.WriteString(".")
		switch t := e.(type) {
		case int:
			b.WriteString(strconv.Itoa(t))
		default:
			b.WriteString(fmt.Sprint(t))
		}
	}
	return b.String()
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
