package main

import (
	"encoding/json"
	"testing"
)

func TestWithID(t *testing.T) {
	for _, in := range []string{`{"version":1,"domain":"d"}`, "  {\n  \"version\": 1\n}\n", `{}`} {
		out := withID([]byte(in), "job-x")
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil || m["id"] != "job-x" {
			t.Errorf("withID(%q) = %q (%v); want valid JSON with the id", in, out, err)
		}
	}
}
