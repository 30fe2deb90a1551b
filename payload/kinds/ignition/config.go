package ignition

import (
	"errors"
	"fmt"

	"github.com/coreos/go-semver/semver"
	ignconfig "github.com/coreos/ignition/v2/config"
	ignerrors "github.com/coreos/ignition/v2/config/shared/errors"
	ignutil "github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/vcontext/report"

	"github.com/vmpayload/vmpayload/payload/internal/butane"
	"github.com/vmpayload/vmpayload/payload/job"
)

// The stable Ignition specs a user's config may use: Ignition v2.26.0
// parses 3.0.0 to 3.6.0 as stable; 3.7.0-experimental is refused, since
// other Ignition releases refuse an experimental spec.
var (
	MinSpec = semver.Version{Major: 3, Minor: 0}
	MaxSpec = semver.Version{Major: 3, Minor: 6}
)

// CheckConfig checks raw, a user's Ignition config given in field,
// the way the guest's Ignition reads it (config.Parse of Ignition
// v2.26.0): every error Ignition reports is a problem, and so is every
// warning (a key Ignition does not know, which it would ignore), each with
// Ignition's message and the JSON path it names. Only stable specs
// 3.0.0-3.6.0 are accepted.
func CheckConfig(field string, raw []byte) []job.FieldError {
	var out []job.FieldError
	v, rpt, err := ignutil.GetConfigVersion(raw)
	if err == nil {
		switch {
		case v.PreRelease != "":
			return []job.FieldError{{Field: ignitionPath(field, []any{"ignition", "version"}), Code: job.CodeUnsupported,
				Message: fmt.Sprintf("Ignition spec %s is experimental (other Ignition releases refuse it); use a stable spec from %s to %s", v, MinSpec, MaxSpec)}}
		case v.LessThan(MinSpec) || MaxSpec.LessThan(v):
			return []job.FieldError{{Field: ignitionPath(field, []any{"ignition", "version"}), Code: job.CodeUnsupported,
				Message: fmt.Sprintf("Ignition spec %s is not supported; use a stable spec from %s to %s", v, MinSpec, MaxSpec)}}
		}
		_, rpt, err = ignconfig.Parse(raw)
	}
	for _, e := range rpt.Entries {
		f := ignitionPath(field, e.Context.Path)
		at := ""
		if f == field && len(e.Context.Path) > 0 {
			at = " (at " + butane.ReportPath(e.Context.Path) + ")"
		} else if f == field && field != "ignition" && e.Marker.StartP != nil && e.Marker.StartP.Index > 0 {
			// the text as given: where Ignition's JSON decoder stopped in
			// it (the offset counts the offending byte)
			line, col := job.LineCol(raw, e.Marker.StartP.Index-1)
			at = fmt.Sprintf(" (line %d, column %d)", line, col)
		}
		switch e.Kind {
		case report.Error:
			out = append(out, job.FieldError{Field: f, Code: job.CodeInvalid, Message: "Ignition refuses the config" + at + ": " + e.Message})
		case report.Warn:
			out = append(out, job.FieldError{Field: f, Code: job.CodeInvalid, Message: "Ignition would ignore this" + at + ": " + e.Message})
		}
	}
	if err != nil && len(out) == 0 {
		code := job.CodeInvalid
		if errors.Is(err, ignerrors.ErrUnknownVersion) || errors.Is(err, ignerrors.ErrInvalidVersion) {
			code = job.CodeUnsupported
		}
		out = append(out, job.FieldError{Field: field, Code: code, Message: "Ignition refuses the config: " + err.Error()})
	}
	return out
}

// ignitionPath is the job path of the element at p (an Ignition report
// path: object keys and array indexes) inside the config given in field.
// A config given as base64 text has no job path inside it: the path goes
// into the message instead (see CheckConfig), so field is returned.
func ignitionPath(field string, p []any) string {
	if field != "ignition" {
		return field
	}
	out := field
	for _, e := range p {
		switch t := e.(type) {
		case int:
			out = job.Index(out, t)
		case string:
			out += "." + t
		default:
			out += "." + fmt.Sprint(t)
		}
	}
	return out
}
