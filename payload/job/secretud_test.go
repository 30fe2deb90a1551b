package job

import (
	"strings"
	"testing"
)

// Content read from a secret must be checked like user_data but never
// quoted: neither the description nor the parser's message may carry it.
func TestValidateSecretUserDataNeverQuotes(t *testing.T) {
	const marker = "TOPSECRET-91ab"
	cases := []struct {
		name, content string
		wantErr       bool
	}{
		{"unknown kind", marker + " plain text\n", true},
		{"broken yaml", "#cloud-config\n" + marker + ": [\n", true},
		{"duplicate key (PyYAML keeps the last)", "#cloud-config\n" + marker + ": 1\n" + marker + ": 2\n", false},
		{"archive", "#cloud-config-archive\n- " + marker + ": [\n", true},
		{"nul byte", "#!/bin/sh\necho " + marker + "\x00\n", true},
		{"bad multipart", "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"\"\n\n" + marker + "\n", true},
		{"good cloud-config", "#cloud-config\nruncmd: [echo " + marker + "]\n", false},
		{"good script", "#!/bin/sh\necho " + marker + "\n", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ValidateSecretUserData("user_data_secret", "ud", c.content)
			if got := len(r.Errors) > 0; got != c.wantErr {
				t.Fatalf("errors = %v, want error %v", r.Errors, c.wantErr)
			}
			for _, fe := range r.Errors {
				if fe.Field != "user_data_secret" {
					t.Errorf("field = %q, want user_data_secret", fe.Field)
				}
				if strings.Contains(fe.Message, marker) {
					t.Errorf("message quotes the secret: %s", fe.Message)
				}
				if !strings.Contains(fe.Message, `secret "ud"`) {
					t.Errorf("message does not name the secret: %s", fe.Message)
				}
			}
		})
	}
}
