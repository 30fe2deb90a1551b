package domxml

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// editOp is one edit, done two ways: as a method of an Edit session and as
// a session of its own on a string (the string -> string function of the
// same name where there is one). Both return what the edit reported
// besides the document (device, flags) as a string.
type editOp struct {
	name    string
	session func(*Edit) (string, error)
	chain   func(string) (string, string, error)
}

var (
	opFind = editOp{"FindPayload",
		func(e *Edit) (string, error) { p, f, err := e.FindPayload(); return showPayload(p, f), err },
		func(x string) (string, string, error) { p, f, err := FindPayload(x); return x, showPayload(p, f), err }}
	opDrive = func(img string, bus Bus, opts ...Option) editOp {
		return editOp{"SetPayloadDrive " + img + " " + string(bus),
			func(e *Edit) (string, error) {
				d, r, err := e.SetPayloadDrive(img, bus, opts...)
				return showDevice(d) + fmt.Sprint(r), err
			},
			func(x string) (string, string, error) {
				out, d, r, err := SetPayloadDrive(x, img, bus, opts...)
				return out, showDevice(d) + fmt.Sprint(r), err
			}}
	}
	opRemoveDrive = editOp{"RemovePayloadDrive",
		func(e *Edit) (string, error) { r, err := e.RemovePayloadDrive(); return fmt.Sprint(r), err },
		func(x string) (string, string, error) {
			out, r, err := oneEdit(x, (*Edit).RemovePayloadDrive)
			return out, fmt.Sprint(r), err
		}}
	opChannel = func(name string) editOp {
		return editOp{"SetGuestChannel " + name,
			func(e *Edit) (string, error) { a, err := e.SetGuestChannel(name); return fmt.Sprint(a), err },
			func(x string) (string, string, error) {
				out, a, err := oneEdit(x, func(e *Edit) (bool, error) { return e.SetGuestChannel(name) })
				return out, fmt.Sprint(a), err
			}}
	}
	opRemoveChannel = editOp{"RemoveGuestChannel",
		func(e *Edit) (string, error) {
			r, err := e.RemoveGuestChannel("org.vmpayload.0")
			return fmt.Sprint(r), err
		},
		func(x string) (string, string, error) {
			out, r, err := oneEdit(x, func(e *Edit) (bool, error) { return e.RemoveGuestChannel("org.vmpayload.0") })
			return out, fmt.Sprint(r), err
		}}
	opMetadata = func(el string) editOp {
		return editOp{"SetMetadata",
			func(e *Edit) (string, error) { return "", e.SetMetadata(testNS, el) },
			func(x string) (string, string, error) { out, err := SetMetadata(x, testNS, el); return out, "", err }}
	}
	opRemoveMetadata = editOp{"RemoveMetadata",
		func(e *Edit) (string, error) { r, err := e.RemoveMetadata(testNS); return fmt.Sprint(r), err },
		func(x string) (string, string, error) {
			out, r, err := oneEdit(x, removeTestNS)
			return out, fmt.Sprint(r), err
		}}
)

func showDevice(d Device) string {
	a := "-"
	if d.Address != nil {
		a = fmt.Sprintf("%+v", *d.Address)
	}
	return fmt.Sprintf("%s %s %s %s ", d.Kind, d.Bus, d.Target, a)
}

func showPayload(p PayloadDisk, found bool) string {
	return fmt.Sprintf("%s %s tray=%v found=%v", p.Path, showDevice(p.Device), p.TrayOpen, found)
}

const testRecipe = `<v:recipe xmlns:v="` + testNS + `" version="1"><v:job>{"a":1}</v:job></v:recipe>`

// editSequences are the edits the agent makes in one session (a start, a
// detach, a job without guest report or recipe) and harder ones: a drive
// set twice (the typed view is decoded again from the edited tree), edits
// that change nothing, and edits that fail half-way.
var editSequences = map[string][]editOp{
	"start": {opFind, opDrive("/p/a.iso", BusAuto), opChannel("org.vmpayload.0"), opMetadata(testRecipe)},
	"start vfat": {opFind, opDrive("/p/a.img", BusAuto, AsDisk()), opChannel("org.vmpayload.0"),
		opMetadata(testRecipe)},
	"start without report or recipe": {opFind, opDrive("/p/a.iso", BusSATA), opRemoveChannel, opRemoveMetadata},
	"detach":                         {opFind, opRemoveDrive, opRemoveMetadata, opRemoveChannel},
	"nothing to remove":              {opRemoveMetadata, opRemoveChannel, opRemoveDrive},
	"drive twice, then find": {opDrive("/p/a.iso", BusIDE), opDrive("/p/b.iso", BusAuto), opFind,
		opDrive("/p/c.img", BusAuto, AsDisk()), opFind},
	"metadata twice, channel twice": {opMetadata(testRecipe), opChannel("org.vmpayload.0"),
		opMetadata(`<w:recipe xmlns:w="` + testNS + `" version="2"/>`), opChannel("org.vmpayload.0"), opRemoveChannel},
	"failing edits in between": {opDrive("relative.iso", BusAuto), opChannel(""), opDrive("/p/a.iso", BusVirtio),
		opMetadata(`<x:r xmlns:x="https://wrong/"/>`), opMetadata("<unclosed"), opDrive("/p/a.iso", BusAuto),
		opRemoveDrive, opFind},
}

// runBothWays applies ops to x in one session and as chained string
// calls (each on the previous call's output, keeping the document when a
// call fails) and reports the first difference in what the edits returned,
// their errors, or the final document.
func runBothWays(x string, ops []editOp) (diff string) {
	ed, err := NewEdit(x)
	if err != nil {
		// What a session cannot parse, no string function accepts.
		for _, op := range ops {
			if _, _, cerr := op.chain(x); cerr == nil {
				return fmt.Sprintf("NewEdit failed (%v) but %s accepted the document", err, op.name)
			}
		}
		return ""
	}
	cur := x
	for i, op := range ops {
		sgot, serr := op.session(ed)
		out, cgot, cerr := op.chain(cur)
		if fmt.Sprint(serr) != fmt.Sprint(cerr) {
			return fmt.Sprintf("edit %d (%s): session error %v, chained %v", i, op.name, serr, cerr)
		}
		if sgot != cgot {
			return fmt.Sprintf("edit %d (%s): session returned %s, chained %s", i, op.name, sgot, cgot)
		}
		if cerr == nil {
			cur = out
		}
	}
	got, err := ed.XML()
	if err != nil {
		return fmt.Sprintf("session XML: %v", err)
	}
	if got != cur {
		return fmt.Sprintf("documents differ:\n--- session\n%s\n--- chained\n%s", got, cur)
	}
	return ""
}

func TestEditMatchesChainedCalls(t *testing.T) {
	inputs := []string{"pc.xml", "q35.xml", "q35-scsi.xml", "replace.xml", "nodevices.xml", "aarch64.xml", "pc-ide-busy.xml", "pc-ide-full.xml"}
	for _, in := range inputs {
		x := readInput(t, in)
		for name, ops := range editSequences {
			t.Run(in+"/"+name, func(t *testing.T) {
				if d := runBothWays(x, ops); d != "" {
					t.Error(d)
				}
			})
		}
	}
}

// TestEditUnchanged checks that a session whose edits change nothing gives
// back the input byte for byte (not re-serialised), and one that changes
// something does not.
func TestEditUnchanged(t *testing.T) {
	x := readInput(t, "replace.xml")
	ed, err := NewEdit(x)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := ed.RemoveMetadata(testNS); err != nil || r {
		t.Fatalf("RemoveMetadata: %v %v", r, err)
	}
	if r, err := ed.RemoveGuestChannel("org.vmpayload.0"); err != nil || r {
		t.Fatalf("RemoveGuestChannel: %v %v", r, err)
	}
	if got, err := ed.XML(); err != nil || got != x {
		t.Errorf("unchanged session: err=%v, XML differs from the input: %v", err, got != x)
	}
	if _, err := ed.SetGuestChannel("org.vmpayload.0"); err != nil {
		t.Fatal(err)
	}
	if got, _ := ed.XML(); got == x || !strings.Contains(got, "name='org.vmpayload.0'") {
		t.Errorf("channel added but the session reports no change:\n%s", got)
	}
}

// TestEditErrors checks that a session refuses what the string functions
// refuse, with the same messages.
func TestEditErrors(t *testing.T) {
	for _, x := range []string{"", "<notdomain/>", "<domain>", "<domain/><domain/>", "<domain><devices><disk><disk></devices></domain>"} {
		_, err := NewEdit(x)
		_, cerr := SetMetadata(x, testNS, testRecipe)
		if err == nil || fmt.Sprint(err) != fmt.Sprint(cerr) {
			t.Errorf("NewEdit(%q) = %v, SetMetadata says %v", x, err, cerr)
		}
	}
}

// FuzzEditSession checks on any input that an edit session and the chained
// string calls agree (results, errors and the final document).
func FuzzEditSession(f *testing.F) {
	for _, n := range []string{"pc.xml", "q35-scsi.xml", "replace.xml", "nodevices.xml"} {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), uint8(0))
	}
	f.Add("<domain><devices><disk><alias name='ua-vmpayload'/><target dev='hdz' bus='ide'/></disk></devices></domain>", uint8(1))
	f.Add("<domain><metadata><v:recipe xmlns:v='"+testNS+"'/></metadata><devices><channel type='unix'><target type='virtio' name='org.vmpayload.0'/></channel></devices></domain>", uint8(3))
	names := make([]string, 0, len(editSequences))
	for n := range editSequences {
		names = append(names, n)
	}
	// map order is random: sort for a stable choice by index
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			if names[j] < names[i] {
				names[i], names[j] = names[j], names[i]
			}
		}
	}
	f.Fuzz(func(t *testing.T, x string, seq uint8) {
		ops := editSequences[names[int(seq)%len(names)]]
		if d := runBothWays(x, ops); d != "" {
			t.Fatal(d)
		}
	})
}

// BenchmarkStartEdits is the agent's edits of a stopped domain's definition
// for a start job (find, drive, guest channel, recipe), as chained string
// calls and as one session.
func BenchmarkStartEdits(b *testing.B) {
	x, err := os.ReadFile(filepath.Join("testdata", "pc.xml"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("chained", func(b *testing.B) {
		for b.Loop() {
			s := string(x)
			if _, _, err := FindPayload(s); err != nil {
				b.Fatal(err)
			}
			s, _, _, err := SetPayloadDrive(s, "/p/a.iso", BusAuto)
			if err == nil {
				s, _, err = oneEdit(s, func(e *Edit) (bool, error) { return e.SetGuestChannel("org.vmpayload.0") })
			}
			if err == nil {
				_, err = SetMetadata(s, testNS, testRecipe)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("session", func(b *testing.B) {
		for b.Loop() {
			ed, err := NewEdit(string(x))
			if err == nil {
				_, _, err = ed.FindPayload()
			}
			if err == nil {
				_, _, err = ed.SetPayloadDrive("/p/a.iso", BusAuto)
			}
			if err == nil {
				_, err = ed.SetGuestChannel("org.vmpayload.0")
			}
			if err == nil {
				err = ed.SetMetadata(testNS, testRecipe)
			}
			if err == nil {
				_, err = ed.XML()
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
