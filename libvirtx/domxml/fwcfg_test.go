package domxml

import (
	"reflect"
	"strings"
	"testing"
)

const ignPath = "/var/run/payload/0a1b2c3d-0000-4000-8000-000000000009-0123456789abcdef.ign"

// TestSetFwCfgFile: the Ignition entries go into a new <sysinfo
// type='fwcfg'> before <os> (pc.xml has none) or replace the entries of
// the same names in an existing one, keeping every other entry and the
// smbios sysinfo (sysinfo.xml); setting them again changes nothing; and
// removing them gives the original document back.
func TestSetFwCfgFile(t *testing.T) {
	for _, c := range []struct {
		input, golden string
		replaced      []string
	}{
		{"pc.xml", "pc-fwcfg.xml", nil},
		{"nodevices.xml", "nodevices-fwcfg.xml", nil},
		{"sysinfo.xml", "sysinfo-fwcfg.xml", []string{"/var/lib/old/config.ign"}},
	} {
		t.Run(c.input, func(t *testing.T) {
			in := readInput(t, c.input)
			ed, err := NewEdit(in)
			if err != nil {
				t.Fatal(err)
			}
			replaced, err := ed.SetFwCfgFile(ignPath, IgnitionFwCfgNames...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(replaced, c.replaced) {
				t.Errorf("replaced %q, want %q", replaced, c.replaced)
			}
			out, err := ed.XML()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.golden, out)
			ents, err := FwCfgEntries(out)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range ents {
				if IsIgnitionFwCfg(e.Name) {
					n++
					if e.File != ignPath {
						t.Errorf("entry %+v, want file %s", e, ignPath)
					}
				}
			}
			if n != len(IgnitionFwCfgNames) {
				t.Errorf("%d Ignition entries in %v", n, ents)
			}
			// again: the document is left as it is
			again, _, err := oneEdit(out, func(ed *Edit) (bool, error) {
				r, err := ed.SetFwCfgFile(ignPath, IgnitionFwCfgNames...)
				return len(r) > 0, err
			})
			if err != nil || again != out {
				t.Errorf("setting the same entries again changed the document (%v):\n%s", err, again)
			}
			// removed: the original (pc.xml), or the original without the
			// old Ignition entry (sysinfo.xml)
			ed, err = NewEdit(out)
			if err != nil {
				t.Fatal(err)
			}
			removed := ed.RemoveFwCfgEntries(func(e FwCfgEntry) bool { return IsIgnitionFwCfg(e.Name) })
			if len(removed) != len(IgnitionFwCfgNames) {
				t.Errorf("removed %v", removed)
			}
			back, err := ed.XML()
			if err != nil {
				t.Fatal(err)
			}
			want := normalize(t, in) // quotes as libvirt writes them
			if c.replaced != nil {
				want = strings.Replace(want, "    <entry name='opt/com.coreos/config' file='/var/lib/old/config.ign'/>\n", "", 1)
			}
			if back != want {
				t.Errorf("after removing the entries:\n%s\nwant\n%s", back, want)
			}
		})
	}
}

// TestRemoveFwCfgEntriesKeepsOthers: removing every entry of a fwcfg
// sysinfo removes the element; an smbios sysinfo and entries not selected
// stay.
func TestRemoveFwCfgEntriesKeepsOthers(t *testing.T) {
	in := readInput(t, "sysinfo.xml")
	ed, err := NewEdit(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := ed.RemoveFwCfgEntries(func(e FwCfgEntry) bool { return e.Name == "nothing" }); got != nil {
		t.Fatalf("removed %v", got)
	}
	if x, _ := ed.XML(); x != in {
		t.Fatal("removing nothing changed the document")
	}
	got := ed.RemoveFwCfgEntries(func(FwCfgEntry) bool { return true })
	if len(got) != 3 || got[0].File != "" || got[1].File != "/var/lib/old/config.ign" {
		t.Errorf("removed %+v", got)
	}
	out, err := ed.XML()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "sysinfo-nofwcfg.xml", out)
	if strings.Contains(out, "type='fwcfg'") || !strings.Contains(out, "type='smbios'") {
		t.Errorf("want the fwcfg sysinfo gone and the smbios one kept:\n%s", out)
	}
}

func TestSetFwCfgFileRefuses(t *testing.T) {
	ed, err := NewEdit(readInput(t, "pc.xml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path  string
		names []string
		want  string
	}{
		{"relative.ign", IgnitionFwCfgNames, "not absolute"},
		{ignPath, nil, "no entry name"},
		{ignPath, []string{"com.coreos/config"}, `"com.coreos/config" does not start with "opt/"`},
	} {
		if _, err := ed.SetFwCfgFile(c.path, c.names...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want %q", c.path, c.names, err, c.want)
		}
	}
	if x, _ := ed.XML(); x != readInput(t, "pc.xml") {
		t.Error("a refused edit changed the document")
	}
}
