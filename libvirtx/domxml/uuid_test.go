package domxml

import "testing"

func TestUUIDShape(t *testing.T) {
	for _, c := range []struct {
		in   string
		ok   bool
		want string
	}{
		{"6695eb01-f6a4-8304-79aa-97f2502e193f", true, "6695eb01-f6a4-8304-79aa-97f2502e193f"},
		{"6695EB01F6A4830479AA97F2502E193F", true, "6695eb01-f6a4-8304-79aa-97f2502e193f"},
		{"6695eb01-f6a4-8304-79aa-97f2502e193", false, "6695eb01-f6a4-8304-79aa-97f2502e193"},
		{"6695eb01-f6a48304-79aa-97f2502e193f", false, "6695eb01-f6a48304-79aa-97f2502e193f"},
		{"web-1", false, "web-1"},
		{"", false, ""},
		{"g695eb01-f6a4-8304-79aa-97f2502e193f", false, "g695eb01-f6a4-8304-79aa-97f2502e193f"},
	} {
		if got := IsUUID(c.in); got != c.ok {
			t.Errorf("IsUUID(%q) = %v, want %v", c.in, got, c.ok)
		}
		if got := CanonicalUUID(c.in); got != c.want {
			t.Errorf("CanonicalUUID(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestReadIdentity(t *testing.T) {
	id, err := ReadIdentity(`<domain type='kvm'><name>web</name><uuid>6695EB01F6A4830479AA97F2502E193F</uuid><devices><disk/></devices></domain>`)
	if err != nil || id != (Identity{Type: "kvm", Name: "web", UUID: "6695EB01F6A4830479AA97F2502E193F"}) {
		t.Errorf("ReadIdentity: %+v %v", id, err)
	}
	if !SameUUID(id.UUID, "6695eb01-f6a4-8304-79aa-97f2502e193f") || SameUUID("web", "web") {
		t.Error("SameUUID")
	}
	if _, err := ReadIdentity(`<node/>`); err == nil {
		t.Error("ReadIdentity accepted a <node>")
	}
}
