package job

import "testing"

// TestButaneTranslatedOnce: validation and the render input both need a
// job's Butane config translated; the second asks gets the first's
// translation (the same bytes, not translated again).
func TestButaneTranslatedOnce(t *testing.T) {
	src := "variant: fcos\nversion: 1.5.0\nstorage:\n  files:\n    - path: /etc/once\n      contents:\n        inline: once\n"
	a, p1 := TranslateButane(src)
	b, p2 := TranslateButane(src)
	if len(p1) > 0 || len(p2) > 0 || len(a) == 0 {
		t.Fatalf("TranslateButane: %v %v", p1, p2)
	}
	if &a[0] != &b[0] {
		t.Error("the config was translated twice")
	}
}
