package payload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	ignconfig "github.com/coreos/ignition/v2/config"
	ignutil "github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_7_experimental/types"
	"github.com/vincent-petithory/dataurl"
)

// IgnitionSummary is what `vmpayload inspect` shows of an Ignition
// config: its spec and what it writes, creates and merges.
type IgnitionSummary struct {
	// Spec is the version the config declares.
	Spec        string   `json:"spec"`
	Files       []string `json:"files,omitempty"`
	Directories []string `json:"directories,omitempty"`
	Links       []string `json:"links,omitempty"`
	Users       []string `json:"users,omitempty"`
	Units       []string `json:"units,omitempty"`
	// Merged are the configs ignition.config.merge references, in order:
	// a data: URL's config summarised, any other source named only.
	Merged []MergedConfig `json:"merged,omitempty"`
	// Replace names the source of ignition.config.replace, if any.
	Replace string `json:"replace,omitempty"`
	// Warnings are the warnings Ignition's parser reports.
	Warnings []string `json:"warnings,omitempty"`
}

// MergedConfig is one config a config merges.
type MergedConfig struct {
	// Source is the reference: "data: URL (N bytes)" or the URL.
	Source  string           `json:"source"`
	Summary *IgnitionSummary `json:"summary,omitempty"`
	// Error says why a data: URL's config could not be read.
	Error string `json:"error,omitempty"`
}

// LooksLikeIgnition reports whether b is a JSON object with an
// ignition.version: an Ignition config (of any spec) rather than
// cloud-init data.
func LooksLikeIgnition(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	_, _, err := ignutil.GetConfigVersion(b)
	if err == nil {
		return true
	}
	var head struct {
		Ignition *struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	return json.Unmarshal(b, &head) == nil && head.Ignition != nil && head.Ignition.Version != ""
}

// SummarizeIgnition parses raw with Ignition's config.Parse and summarises
// it; configs it merges from data: URLs are summarised too (depth limits
// the nesting followed).
func SummarizeIgnition(raw []byte) (IgnitionSummary, error) {
	return summarize(raw, 4)
}

func summarize(raw []byte, depth int) (IgnitionSummary, error) {
	var s IgnitionSummary
	v, _, err := ignutil.GetConfigVersion(raw)
	if err != nil {
		return s, fmt.Errorf("not an Ignition config: %w", err)
	}
	s.Spec = v.String()
	c, rpt, err := ignconfig.Parse(raw)
	if err != nil {
		msg := err.Error()
		if len(rpt.Entries) > 0 {
			msg = rpt.String()
		}
		return s, fmt.Errorf("Ignition refuses the config: %s", strings.TrimSpace(msg))
	}
	for _, e := range rpt.Entries {
		s.Warnings = append(s.Warnings, e.String())
	}
	for _, f := range c.Storage.Files {
		s.Files = append(s.Files, f.Path)
	}
	for _, d := range c.Storage.Directories {
		s.Directories = append(s.Directories, d.Path)
	}
	for _, l := range c.Storage.Links {
		t := ""
		if l.Target != nil {
			t = *l.Target
		}
		s.Links = append(s.Links, l.Path+" -> "+t)
	}
	for _, u := range c.Passwd.Users {
		s.Users = append(s.Users, u.Name)
	}
	for _, u := range c.Systemd.Units {
		s.Units = append(s.Units, u.Name)
	}
	if r := c.Ignition.Config.Replace; r.Source != nil {
		s.Replace = describeSource(*r.Source)
	}
	for _, m := range c.Ignition.Config.Merge {
		s.Merged = append(s.Merged, mergedConfig(m, depth))
	}
	return s, nil
}

func mergedConfig(m types.Resource, depth int) MergedConfig {
	if m.Source == nil {
		return MergedConfig{Source: "(none)"}
	}
	mc := MergedConfig{Source: describeSource(*m.Source)}
	if !strings.HasPrefix(*m.Source, "data:") || depth == 0 {
		return mc
	}
	du, err := dataurl.DecodeString(*m.Source)
	if err != nil {
		mc.Error = err.Error()
		return mc
	}
	sum, err := summarize(du.Data, depth-1)
	if err != nil {
		mc.Error = err.Error()
		return mc
	}
	mc.Summary = &sum
	return mc
}

func describeSource(src string) string {
	if strings.HasPrefix(src, "data:") {
		return fmt.Sprintf("data: URL (%d bytes)", len(src))
	}
	return src
}

// Text renders the summary for people, each line indented by prefix.
func (s IgnitionSummary) Text(prefix string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%signition spec: %s\n", prefix, s.Spec)
	list := func(name string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(&b, "%s%s:\n", prefix, name)
		for _, i := range items {
			fmt.Fprintf(&b, "%s  %s\n", prefix, i)
		}
	}
	list("files", s.Files)
	list("directories", s.Directories)
	list("links", s.Links)
	list("users", s.Users)
	list("units", s.Units)
	if s.Replace != "" {
		fmt.Fprintf(&b, "%sreplaced by: %s\n", prefix, s.Replace)
	}
	for i, m := range s.Merged {
		fmt.Fprintf(&b, "%smerges [%d]: %s\n", prefix, i, m.Source)
		if m.Error != "" {
			fmt.Fprintf(&b, "%s  error: %s\n", prefix, m.Error)
		}
		if m.Summary != nil {
			b.WriteString(m.Summary.Text(prefix + "  "))
		}
	}
	list("warnings", s.Warnings)
	return b.String()
}
