package cloudinit_test

import (
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	"github.com/vmpayload/vmpayload/payload/job"
)

func mustRender(t *testing.T, j job.Job) *cloudinit.Documents {
	t.Helper()
	d, err := render(j, payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestInstanceIDStableForIdenticalContent(t *testing.T) {
	base := job.Job{Version: 1, Hostname: "h", Users: []job.User{{Name: "u", Password: "pw-1"}}}
	a, b := mustRender(t, base), mustRender(t, base)
	if a.InstanceID != b.InstanceID || a.ContentHash != b.ContentHash {
		t.Errorf("identical jobs gave %s/%s and %s/%s", a.InstanceID, a.ContentHash, b.InstanceID, b.ContentHash)
	}
	// deterministic salt: identical jobs render identical documents
	for i := range a.Files {
		if string(a.Files[i].Data) != string(b.Files[i].Data) {
			t.Errorf("%s differs between two renders of the same job", a.Files[i].Path)
		}
	}
	other := base
	other.Users = []job.User{{Name: "u", Password: "pw-2"}}
	if c := mustRender(t, other); c.InstanceID == a.InstanceID {
		t.Errorf("a changed password kept the instance-id")
	}
	// job identity fields do not change the instance
	moved := base
	moved.ID, moved.Domain = "another", "vm2"
	if c := mustRender(t, moved); c.InstanceID != a.InstanceID || c.ContentHash != a.ContentHash {
		t.Errorf("id/domain changed the content identity")
	}
	// media changes the image, not the instance
	vfat := base
	vfat.Media = job.MediaVFAT
	if c := mustRender(t, vfat); c.InstanceID != a.InstanceID || c.ContentHash == a.ContentHash {
		t.Errorf("media: iid %s vs %s, hash %s vs %s", c.InstanceID, a.InstanceID, c.ContentHash, a.ContentHash)
	}
	pinned := base
	pinned.InstanceID = "i-pinned"
	if c := mustRender(t, pinned); c.InstanceID != "i-pinned" {
		t.Errorf("pinned instance id ignored: %s", c.InstanceID)
	}
	for _, f := range a.Files {
		if strings.Contains(string(f.Data), "pw-1") {
			t.Errorf("%s holds the plaintext password", f.Path)
		}
	}
}

// TestCheckRefusesWhatRenderCannotExpress: the check in front of the
// renderer refuses what a format or mode cannot express.
func TestCheckRefusesWhatRenderCannotExpress(t *testing.T) {
	for _, c := range []struct {
		name  string
		j     job.Job
		field string
	}{
		{"configdrive with raw network_config", job.Job{Version: 1, Format: job.FormatConfigDrive, NetworkConfig: "version: 2\nethernets: {}\n"}, "network_config"},
		{"replace drops generated config", job.Job{Version: 1, UserData: "#!/bin/sh\n", UserDataMode: job.ModeReplace, Runcmd: []job.Command{{Shell: "x"}}}, "user_data_mode"},
		{"unresolved secret", job.Job{Version: 1, Users: []job.User{{Name: "u", PasswordSecret: "s"}}}, "users[0].password_secret"},
	} {
		_, err := render(c.j, payload.Options{})
		ve, ok := err.(*job.ValidationError)
		if !ok || ve.Errors[0].Field != c.field {
			t.Errorf("%s: %v, want an error on %s", c.name, err, c.field)
		}
	}
}

func TestDeterministicSalt(t *testing.T) {
	base := cloudinit.DeterministicSalt("pw", "alice", "web1")
	if len(base) != 16 || strings.Trim(base, cloudinit.SaltAlphabet) != "" {
		t.Fatalf("salt %q is not 16 characters of crypt's alphabet", base)
	}
	for _, c := range []struct {
		name, plain, user, host string
		same                    bool
	}{
		{"same context", "pw", "alice", "web1", true},
		{"other password", "pw2", "alice", "web1", false},
		{"other user", "pw", "bob", "web1", false},
		{"other host", "pw", "alice", "web2", false},
		{"no field shift", "pw", "alic", "eweb1", false},
	} {
		if got := cloudinit.DeterministicSalt(c.plain, c.user, c.host); (got == base) != c.same {
			t.Errorf("%s: salt %q vs %q, want same=%v", c.name, got, base, c.same)
		}
	}
	// the hash that reaches the image uses it, and Documents exposes it
	j := job.Job{Version: 1, Hostname: "web1", Users: []job.User{{Name: "alice", Password: "pw"}, {Name: "bob"}}}
	d := mustRender(t, j)
	want, err := cloudinit.HashPassword("pw", func() (string, error) { return base, nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(d.PasswordHashes) != 2 || d.PasswordHashes[0] != want || d.PasswordHashes[1] != "" {
		t.Fatalf("PasswordHashes %q, want [%q \"\"]", d.PasswordHashes, want)
	}
	if !strings.Contains(string(d.Files[1].Data), want) {
		t.Errorf("user-data lacks the hash %s", want)
	}
}

func TestPinnedIdentity(t *testing.T) {
	j := job.Job{Version: 1, Hostname: "h", UserData: "#!/bin/sh\necho hi\n", Runcmd: []job.Command{{Shell: "true"}}}
	orig := mustRender(t, j)
	id := &payload.Identity{ContentHash: strings.Repeat("ab", 32), InstanceID: "iid-x"}
	d, err := render(j, payload.Options{Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	if d.ContentHash != id.ContentHash || d.InstanceID != id.InstanceID || d.ContentHash == orig.ContentHash {
		t.Errorf("pinned identity not used: %s %s", d.ContentHash, d.InstanceID)
	}
	for _, bad := range []*payload.Identity{{ContentHash: "xyz", InstanceID: "i"}, {ContentHash: id.ContentHash}} {
		if _, err := render(j, payload.Options{Identity: bad}); err == nil {
			t.Errorf("identity %+v accepted", bad)
		}
	}
}

// TestMergeRefusesUnjoinableLists: a #cloud-config key the job generates
// as a list, given as something else, would lose one side in cloud-init's
// merger, so it is refused naming user_data.
func TestMergeRefusesUnjoinableLists(t *testing.T) {
	base := job.Job{Version: 1, Runcmd: []job.Command{{Shell: "echo job"}}, Users: []job.User{{Name: "u1"}}}
	for _, c := range []struct {
		ud   string
		mode job.UserDataMode
		bad  bool
	}{
		{"#cloud-config\nruncmd: echo str\n", job.ModeMerge, true},
		{"#cloud-config\nusers: {u: {}}\n", job.ModeMerge, true},
		{"#cloud-config\nruncmd:\n", job.ModeMerge, true},
		{"#cloud-config\nx: &a [1]\nruncmd: *a\n", job.ModeMerge, false},
		{"#cloud-config\nruncmd: [echo user]\nwrite_files: str\n", job.ModeMerge, false}, // the job has no files
	} {
		j := base
		j.UserData = c.ud
		_, err := render(j, payload.Options{})
		if (err != nil) != c.bad || (err != nil && !strings.Contains(err.Error(), "user_data")) {
			t.Errorf("%q: err %v, want refused %v", c.ud, err, c.bad)
		}
	}
}
