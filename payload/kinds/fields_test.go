package kinds

import "testing"

// TestFields checks the field table's shape: each field once per kind, a refusal
// or an owner per row, and the count of refusals per kind the three
// tables it replaced had (ignition 21, windows 15, sysprep 27), and the
// credentials kind's 23 (issue 42's own table before it joined).
func TestFields(t *testing.T) {
	seen := map[string]bool{}
	count := map[string]int{}
	for _, f := range Fields() {
		for k := range f.Why {
			if seen[f.Name+" "+k] {
				t.Errorf("field %s has two rows for kind %s", f.Name, k)
			}
			seen[f.Name+" "+k] = true
		}
		if (f.Only == "") == (len(f.Why) == 0) {
			t.Errorf("field %s: give either the one kind that takes it or the reasons of those that refuse it", f.Name)
		}
		for k, why := range f.Why {
			if why == "" || who(k) == "" {
				t.Errorf("field %s: refusal of kind %q without a reason or a kind", f.Name, k)
			}
			count[k]++
		}
	}
	want := map[string]int{Ignition: 21, Windows: 15, Sysprep: 27, Credentials: 23}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("kind %s refuses %d fields, want %d", k, count[k], n)
		}
	}
}
