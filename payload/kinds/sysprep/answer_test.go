package sysprep

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

// TestAnswer: sysprep_base64 gives the same text as sysprep, byte order
// mark kept, and names its field.
func TestAnswer(t *testing.T) {
	const text = "\uFEFF<unattend xmlns=\"urn:schemas-microsoft-com:unattend\"/>"
	j := &job.Job{Version: 1, Format: job.FormatSysprep, SysprepBase64: base64.StdEncoding.EncodeToString([]byte(text))}
	if got, f, err := Answer(j); err != nil || f != "sysprep_base64" || got != text {
		t.Errorf("Answer = %q, %q, %v", got, f, err)
	}
	if got := (kind{}).Document(j); got != text {
		t.Errorf("Document = %q", got)
	}
}

// A secret's answer file is never quoted: not the offending line, not an
// excerpt.
func TestSysprepSecretNotQuoted(t *testing.T) {
	j := &job.Job{Version: 1, Format: job.FormatSysprep, SysprepSecret: "answer"}
	secret := "<unattend xmlns=\"urn:schemas-microsoft-com:unattend\">\n<Value>hunter2-SECRET</Valu>\n</unattend>"
	errs := kind{}.CheckDocument(j, "sysprep_secret", secret)
	if len(errs) != 1 || errs[0].Field != "sysprep_secret" || !strings.Contains(errs[0].Message, `secret "answer"`) || !strings.Contains(errs[0].Message, "line 2") {
		t.Fatalf("errors %v", errs)
	}
	if strings.Contains(errs[0].Message, "hunter2") {
		t.Errorf("the message quotes the secret: %s", errs[0].Message)
	}
	long := "<unattend xmlns=\"urn:schemas-microsoft-com:unattend\">{{" + strings.Repeat("p", 50) + "}}</unattend>"
	errs = CheckAnswer(j, "sysprep_secret", long, true)
	if len(errs) != 1 || strings.Contains(errs[0].Message, "ppppp") {
		t.Errorf("a long {{...}} is quoted: %v", errs)
	}
}

// TestValues: the placeholders' values come from the job's fields, the
// time zone mapped to Windows'.
func TestValues(t *testing.T) {
	j := &job.Job{Version: 1, Format: job.FormatSysprep, Timezone: "Europe/Berlin", UILanguage: "en-US", OrgName: "Example & Co"}
	v := Values(j)
	if v["ui_language"] != "en-US" || v["timezone"] != "W. Europe Standard Time" || v["org_name"] != "Example & Co" {
		t.Errorf("Values = %v", v)
	}
}
