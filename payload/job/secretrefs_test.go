package job

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fillSecrets sets every string field of v whose json name ends in
// "_secret" to a distinct name, giving each slice of structs one element
// and each pointer to a struct a value, and returns the paths it set
// ("users[].password_secret").
func fillSecrets(v reflect.Value, prefix string, n *int) []string {
	var paths []string
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		fv := v.Field(i)
		switch {
		case strings.HasSuffix(name, "_secret"):
			if fv.Kind() != reflect.String {
				panic(fmt.Sprintf("%s is not a string", p))
			}
			*n++
			fv.SetString(fmt.Sprintf("s%d", *n))
			paths = append(paths, p)
		case fv.Kind() == reflect.Struct:
			paths = append(paths, fillSecrets(fv, p, n)...)
		case fv.Kind() == reflect.Pointer && fv.Type().Elem().Kind() == reflect.Struct:
			fv.Set(reflect.New(fv.Type().Elem()))
			paths = append(paths, fillSecrets(fv.Elem(), p, n)...)
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
			fv.Set(reflect.MakeSlice(fv.Type(), 1, 1))
			paths = append(paths, fillSecrets(fv.Index(0), p+"[]", n)...)
		}
	}
	return paths
}

// TestSecretRefsCoversEverySecretField: every field of the job format
// whose json name ends in "_secret", however deep, is listed by
// SecretRefs with its path and the name it holds (a new field fails here
// until SecretRefs lists it, so the access policy cannot miss it).
func TestSecretRefsCoversEverySecretField(t *testing.T) {
	var j Job
	n := 0
	want := fillSecrets(reflect.ValueOf(&j).Elem(), "", &n)
	if len(want) < 5 {
		t.Fatalf("found only %v; the walk misses fields", want)
	}
	index := regexp.MustCompile(`\[\d+\]`)
	var got []string
	names := map[string]bool{}
	for _, r := range j.SecretRefs() {
		got = append(got, index.ReplaceAllString(r.Field, "[]"))
		names[r.Name] = true
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("SecretRefs lists %v; the job's *_secret fields are %v", got, want)
	}
	if len(names) != n {
		t.Errorf("SecretRefs gives %d distinct names, want %d (a field's name is not its own)", len(names), n)
	}
}

func TestSecretRefs(t *testing.T) {
	j := Job{UserDataSecret: "ud", Users: []User{{Name: "a"}, {Name: "b", PasswordSecret: "pw"}},
		SSHHostKeys: []SSHHostKey{{Type: "ed25519", PrivateKeySecret: "k0"}, {Type: "rsa", PrivateKeySecret: "k1"}}}
	want := []SecretRef{{"users[1].password_secret", "pw"}, {"ssh_host_keys[0].private_key_secret", "k0"},
		{"ssh_host_keys[1].private_key_secret", "k1"}, {"user_data_secret", "ud"}}
	if got := j.SecretRefs(); !slices.Equal(got, want) {
		t.Errorf("SecretRefs() = %v, want %v", got, want)
	}
	if got := (&Job{}).SecretRefs(); got != nil {
		t.Errorf("a job without secrets lists %v", got)
	}
}
