package spool

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestClaimAll(t *testing.T) {
	s := open(t)
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Put(id, []byte(`{"version":1,"id":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	// "b" is also running under the same name: it must stay waiting
	if err := os.WriteFile(filepath.Join(s.Dir(Processing), "b.json"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	claimed, errs := s.ClaimAll([]string{"a.json", "b.json", "c.json", "gone.json", "../x.json"})
	if len(claimed) != 2 || claimed[0].Name != "a.json" || claimed[1].Name != "c.json" {
		t.Fatalf("claimed %+v", claimed)
	}
	for _, c := range claimed {
		if c.Token == "" || c.ReadErr != nil || len(c.Data) == 0 {
			t.Errorf("claim %+v", c)
		}
		if _, err := os.Stat(c.Path); err != nil {
			t.Errorf("%s not in processing/: %v", c.Name, err)
		}
	}
	if !errors.Is(errs["b.json"], ErrExists) || !errors.Is(errs["gone.json"], os.ErrNotExist) || errs["../x.json"] == nil || len(errs) != 3 {
		t.Errorf("errors %v", errs)
	}
	if names, _ := s.Pending(); len(names) != 1 || names[0] != "b.json" {
		t.Errorf("pending after ClaimAll: %v", names)
	}
	if c, errs := s.ClaimAll(nil); len(c) != 0 || len(errs) != 0 {
		t.Errorf("empty batch: %v %v", c, errs)
	}
}
