package job

import (
	"reflect"
	"testing"
)

// TestParseWithDefaults: checks that depend on the format apply to a job
// naming none once the default format is known, and only then.
func TestParseWithDefaults(t *testing.T) {
	const seedReplace = `{"version":1,"user_data_mode":"replace","user_data":"#!/bin/sh\ntrue\n","random_seed":{"generate_bytes":64}}`
	const netData = `{"version":1,"network_data":{"links":[{"id":"l0","type":"phy","ethernet_mac_address":"52:54:00:00:00:01"}]}}`
	for _, c := range []struct {
		name, doc string
		def       Defaults
		want      []string // field|code; nil: valid
	}{
		{"replace random_seed, format unknown", seedReplace, Defaults{}, []string{"user_data_mode|conflict"}},
		{"replace random_seed, default nocloud", seedReplace, Defaults{Format: FormatNoCloud}, []string{"user_data_mode|conflict"}},
		{"replace random_seed, default configdrive", seedReplace, Defaults{Format: FormatConfigDrive}, nil},
		{"network_data, default nocloud", netData, Defaults{}, []string{"network_data|conflict"}},
		{"network_data, default configdrive", netData, Defaults{Format: FormatConfigDrive}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, r := ParseWith([]byte(c.doc), c.def)
			if got := pairs(r.Errors); !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
				t.Errorf("ParseWith: %q, want %q", got, c.want)
			}
		})
	}
	// Parse alone does not know the agent's default: it leaves the
	// format-dependent checks to ParseWith.
	if _, r := Parse([]byte(netData)); !r.OK() {
		t.Errorf("Parse without defaults: %v", r.Err())
	}
}

func TestApplyDefaults(t *testing.T) {
	j := Job{Version: 1}
	got := j.Apply(Defaults{Format: FormatConfigDrive})
	want := Job{Version: 1, Action: ActionStart, Format: FormatConfigDrive, Media: MediaISO, UserDataMode: ModeMerge}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Apply: %+v, want %+v", got, want)
	}
	if got := (Job{Version: 1, Format: FormatNoCloud}).Apply(Defaults{Format: FormatConfigDrive}); got.Format != FormatNoCloud {
		t.Errorf("Apply overrode the job's own format: %q", got.Format)
	}
	if got := j.Apply(Defaults{}); got.Format != FormatNoCloud {
		t.Errorf("Apply without a default format: %q, want nocloud", got.Format)
	}
}
