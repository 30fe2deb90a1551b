// Package butane translates a Butane config (YAML, github.com/coreos/butane
// v0.29.0) into the Ignition config it stands for, with Butane's own
// translators and the options Butane's command line uses by default, so
// that a job's butane field is read exactly as `butane --strict` reads it.
//
// Only the stable variant versions that produce an Ignition config are
// linked (Translators): fcos, flatcar, fiot and r4e. The experimental
// versions produce an experimental Ignition spec, which other Ignition
// releases refuse; the openshift variant produces a MachineConfig for a
// cluster's Machine Config Operator, and its sixteen versions alone would
// add more package initialisation to every vmpayload process than all of
// Ignition's config packages (docs/ignition.md, Butane). Package
// github.com/coreos/butane/config, which registers every variant, is not
// imported for that reason.
package butane

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/coreos/butane/config/common"
	fcos1_0 "github.com/coreos/butane/config/fcos/v1_0"
	fcos1_1 "github.com/coreos/butane/config/fcos/v1_1"
	fcos1_2 "github.com/coreos/butane/config/fcos/v1_2"
	fcos1_3 "github.com/coreos/butane/config/fcos/v1_3"
	fcos1_4 "github.com/coreos/butane/config/fcos/v1_4"
	fcos1_5 "github.com/coreos/butane/config/fcos/v1_5"
	fcos1_6 "github.com/coreos/butane/config/fcos/v1_6"
	fcos1_7 "github.com/coreos/butane/config/fcos/v1_7"
	fiot1_0 "github.com/coreos/butane/config/fiot/v1_0"
	flatcar1_0 "github.com/coreos/butane/config/flatcar/v1_0"
	flatcar1_1 "github.com/coreos/butane/config/flatcar/v1_1"
	r4e1_0 "github.com/coreos/butane/config/r4e/v1_0"
	r4e1_1 "github.com/coreos/butane/config/r4e/v1_1"
	"github.com/coreos/go-semver/semver"
	"github.com/coreos/vcontext/report"
	"go.yaml.in/yaml/v3"
)

// translator is the signature of Butane's per-version ToIgn3_*Bytes.
type translator func([]byte, common.TranslateBytesOptions) ([]byte, report.Report, error)

// Translators lists, per Butane variant, the versions accepted and the
// Ignition spec each produces.
var Translators = map[string][]Version{
	"fcos": {
		{"1.0.0", "3.0.0", fcos1_0.ToIgn3_0Bytes}, {"1.1.0", "3.1.0", fcos1_1.ToIgn3_1Bytes},
		{"1.2.0", "3.2.0", fcos1_2.ToIgn3_2Bytes}, {"1.3.0", "3.2.0", fcos1_3.ToIgn3_2Bytes},
		{"1.4.0", "3.3.0", fcos1_4.ToIgn3_3Bytes}, {"1.5.0", "3.4.0", fcos1_5.ToIgn3_4Bytes},
		{"1.6.0", "3.5.0", fcos1_6.ToIgn3_5Bytes}, {"1.7.0", "3.6.0", fcos1_7.ToIgn3_6Bytes},
	},
	"flatcar": {{"1.0.0", "3.3.0", flatcar1_0.ToIgn3_3Bytes}, {"1.1.0", "3.4.0", flatcar1_1.ToIgn3_4Bytes}},
	"fiot":    {{"1.0.0", "3.4.0", fiot1_0.ToIgn3_4Bytes}},
	"r4e":     {{"1.0.0", "3.3.0", r4e1_0.ToIgn3_3Bytes}, {"1.1.0", "3.4.0", r4e1_1.ToIgn3_4Bytes}},
}

// Version is one accepted version of a Butane variant.
type Version struct {
	// Butane is the config's version; Ignition the spec it translates to.
	Butane, Ignition string
	translate        translator
}

// options are the translation options: those of Butane's command line
// without flags (no files directory, so a local: reference is refused;
// inline resources gzip-compressed where that makes them smaller; compact
// JSON).
var options = common.TranslateBytesOptions{}

// Problem is one thing Butane refuses or warns about in a config.
type Problem struct {
	// Path is the YAML path Butane names ("$.storage.files.0.path"), ""
	// when it names none.
	Path string
	// Line and Column locate it in the config (1-based; 0 when unknown).
	Line, Column int
	// Message is Butane's message (or, for a local: reference, ours).
	Message string
	// Warning is set for what Butane translates but warns about.
	Warning bool
	// Unsupported is set for a variant or version not accepted.
	Unsupported bool
}

// String renders p as "(at $.a.b, line 3, column 5): message" without the
// parts it lacks.
func (p Problem) String() string {
	var at []string
	if p.Path != "" {
		at = append(at, "at "+p.Path)
	}
	if p.Line > 0 {
		at = append(at, fmt.Sprintf("line %d, column %d", p.Line, p.Column))
	}
	if len(at) == 0 {
		return p.Message
	}
	return "(" + strings.Join(at, ", ") + "): " + p.Message
}

// MsgNoFilesDir replaces Butane's message for a local: reference (a path
// in the files directory of Butane's --files-dir), which a job has none of.
const MsgNoFilesDir = "this names a file in Butane's files directory (--files-dir), which a job has none of: give the contents inline (inline:, ssh_authorized_keys:) or as a source: URL"

// Translate returns the Ignition config (JSON) that the Butane config src
// translates to, and the spec it has; or, when Butane refuses the config
// or warns about it, the problems, errors first. A warning is a problem
// too, as with `butane --strict`: it names something Butane translates in
// a way the author likely did not mean (a key it ignores, say).
func Translate(src []byte) (ign []byte, spec string, problems []Problem) {
	v, probs := header(src)
	if probs != nil {
		return nil, "", probs
	}
	out, rpt, err := translate(v, src)
	for _, e := range rpt.Entries {
		if e.Kind != report.Error && e.Kind != report.Warn {
			continue
		}
		p := Problem{Path: ReportPath(e.Context.Path), Message: e.Message, Warning: e.Kind == report.Warn}
		if e.Marker.StartP != nil {
			p.Line, p.Column = int(e.Marker.StartP.Line), int(e.Marker.StartP.Column)
		}
		if e.Message == common.ErrNoFilesDir.Error() {
			p.Message = MsgNoFilesDir
		}
		problems = append(problems, p)
	}
	slices.SortStableFunc(problems, func(a, b Problem) int {
		switch {
		case a.Warning == b.Warning:
			return 0
		case b.Warning:
			return -1
		}
		return 1
	})
	if err != nil && !hasError(problems) {
		problems = append([]Problem{{Message: oneLine(err.Error())}}, problems...)
	}
	if len(problems) > 0 {
		return nil, "", problems
	}
	return out, v.Ignition, nil
}

// translate runs Butane's translator for v on src; a panic in it (Butane
// is not written for untrusted input) is an error, not the agent's end.
func translate(v Version, src []byte) (out []byte, rpt report.Report, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, rpt, err = nil, report.Report{}, fmt.Errorf("Butane failed on this config: %v", p)
		}
	}()
	return v.translate(src, options)
}

func hasError(ps []Problem) bool {
	return slices.ContainsFunc(ps, func(p Problem) bool { return !p.Warning })
}

// header reads the config's variant and version the way Butane's
// config.TranslateBytes does, and returns the translator for them, or the
// problem with its line.
func header(src []byte) (Version, []Problem) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return Version{}, []Problem{{Message: "not valid YAML: " + oneLine(err.Error())}}
	}
	var variant, version *yaml.Node
	if len(doc.Content) > 0 {
		top := doc.Content[0]
		if top.Kind != yaml.MappingNode {
			return Version{}, []Problem{{Line: top.Line, Column: top.Column, Message: "a Butane config is a YAML mapping (variant: …, version: …), not a " + kindName(top)}}
		}
		for i := 0; i+1 < len(top.Content); i += 2 {
			v := top.Content[i+1]
			for v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			switch top.Content[i].Value {
			case "variant":
				variant = v
			case "version":
				version = v
			}
		}
	}
	at := func(n *yaml.Node, path, msg string) []Problem {
		return []Problem{{Path: path, Line: n.Line, Column: n.Column, Message: msg, Unsupported: true}}
	}
	if variant == nil || variant.Kind == yaml.ScalarNode && variant.Value == "" {
		return Version{}, []Problem{{Path: "$.variant", Message: "the config names no variant; give one of " + variants()}}
	}
	if variant.Kind != yaml.ScalarNode {
		return Version{}, at(variant, "$.variant", "the variant is a "+kindName(variant)+", not a string; give one of "+variants())
	}
	name := variant.Value
	versions, ok := Translators[name]
	if !ok {
		msg := fmt.Sprintf("variant %s is not accepted; give one of %s", strconv.Quote(name), variants())
		if name == "openshift" {
			msg += " (the openshift variant makes a MachineConfig for a cluster; translate it with `butane --raw` and give the result as ignition)"
		}
		return Version{}, at(variant, "$.variant", msg)
	}
	if version == nil || version.Kind == yaml.ScalarNode && version.Value == "" {
		return Version{}, []Problem{{Path: "$.version", Message: fmt.Sprintf("the config names no version; variant %s accepts %s", name, versionList(versions))}}
	}
	ver, err := semver.NewVersion(version.Value)
	if version.Kind != yaml.ScalarNode || err != nil {
		return Version{}, at(version, "$.version", fmt.Sprintf("version %s is not a semantic version (like %s)", strconv.Quote(version.Value), versions[len(versions)-1].Butane))
	}
	for _, v := range versions {
		if v.Butane == ver.String() {
			return v, nil
		}
	}
	msg := fmt.Sprintf("variant %s has no version %s; give one of %s", name, ver, versionList(versions))
	if ver.PreRelease != "" {
		msg = fmt.Sprintf("version %s of variant %s is experimental: it makes an experimental Ignition spec, which other Ignition releases refuse; give one of %s", ver, name, versionList(versions))
	}
	return Version{}, at(version, "$.version", msg)
}

// kindName names a YAML node's kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "sequence"
	case yaml.MappingNode:
		return "mapping"
	}
	return "scalar"
}

// oneLine joins the lines of a YAML decoder's message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// variants is the accepted variants, quoted, for messages.
func variants() string {
	var names []string
	for n := range Translators {
		names = append(names, strconv.Quote(n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func versionList(vs []Version) string {
	var s []string
	for _, v := range vs {
		s = append(s, v.Butane)
	}
	return strings.Join(s, ", ")
}

// ReportPath renders the path of a Butane or Ignition report entry
// (vcontext) as "$.storage.files.0.path"; "" for none.
func ReportPath(p []any) string {
	if len(p) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("$")
	for _, e := range p {
		fmt.Fprintf(&b, ".%v", e)
	}
	return b.String()
}
