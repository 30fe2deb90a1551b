// Package ignconvert converts an Ignition spec 2.x config — what Container
// Linux Config Transpiler (`ct`) writes, still in Flatcar users' hands —
// into spec 3, the way Flatcar's Ignition does: Ignition v0.x's own parser
// reads it (config/v2_4.Parse, which reads every spec from 2.0.0 to 2.4.0
// and translates it up to 2.4.0) and github.com/coreos/ign-converter's
// translate/v24tov31 translates it to spec 3.1.0, with the root filesystem
// as the only filesystem mapping (its files, directories and links are
// written under /). The result is judged afterwards like any spec 3 config
// (payload/kinds/ignition.CheckConfig: Ignition's config.Parse).
package ignconvert

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v24tov31 "github.com/coreos/ign-converter/translate/v24tov31"
	v2_4 "github.com/coreos/ignition/config/v2_4"
	oldreport "github.com/coreos/ignition/config/validate/report"
)

// Tool names the conversion in messages.
const Tool = "github.com/coreos/ign-converter (translate/v24tov31), as Flatcar's Ignition converts spec 2 configs"

// Convert returns the spec 3.1.0 config (JSON) of raw, a spec 2.x config,
// or why it cannot be converted: what Ignition v0.x's parser refuses, or
// what the converter refuses (networkd units, which spec 3 has no place
// for; filesystems other than root; a path written twice). Ignition v0.x's
// warnings do not stop it, as they do not stop Flatcar's Ignition (which
// logs them): some are spurious (v0.x warns "unrecognized key: tls" for
// the ignition.security.tls that ct writes), and what they are about is
// judged again on the converted config by the current Ignition's
// config.Parse, whose warnings the caller refuses.
func Convert(raw []byte) ([]byte, error) {
	cfg, rpt, err := v2_4.Parse(raw)
	if msg := problems(rpt); msg != "" {
		return nil, fmt.Errorf("Ignition v0.x refuses the spec 2 config: %s", msg)
	}
	if err != nil {
		return nil, fmt.Errorf("Ignition v0.x refuses the spec 2 config: %w", err)
	}
	out, err := v24tov31.Translate(cfg, map[string]string{})
	if err != nil {
		return nil, fmt.Errorf("ign-converter cannot translate the spec 2 config to spec 3: %s", oneLine(err))
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encoding the converted config: %w", err)
	}
	return b, nil
}

// problems renders the errors of an Ignition v0.x report (their messages:
// the entry's own rendering quotes the input over several lines).
func problems(r oldreport.Report) string {
	var out []string
	for _, e := range r.Entries {
		if e.Kind == oldreport.EntryError {
			out = append(out, oneLine(errors.New(e.Message)))
		}
	}
	return strings.Join(out, "; ")
}

// oneLine joins the lines of err's message.
func oneLine(err error) string {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}
