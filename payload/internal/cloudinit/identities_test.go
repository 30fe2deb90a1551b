package cloudinit_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	"github.com/vmpayload/vmpayload/payload/job"
)

// TestRenderIdentitiesConcurrent renders jobs whose content and instance
// hashes Render derives on a second goroutine (a plaintext password, big
// file contents, merged user-data that needs the content hash, a pinned
// identity) and the same jobs with the derivation forced inline: every
// document, the content hash, the instance-id and the password hashes must
// be the same (run with -race, it also checks the two goroutines share
// nothing they write).
func TestRenderIdentitiesConcurrent(t *testing.T) {
	big := func(n int) []job.File {
		var fs []job.File
		body := strings.Repeat("0123456789abcdef\"<&>\n", 300) // 6.3 KB, escaped in JSON
		for i := range n {
			fs = append(fs, job.File{Path: "/srv/f" + strings.Repeat("x", i%5) + string(rune('a'+i%26)), Content: body})
		}
		return fs
	}
	yes := true
	cases := []struct {
		name string
		j    job.Job
	}{
		{"plaintext password", job.Job{Version: 1, Hostname: "h1", Users: []job.User{{Name: "alice", Password: "correct horse"}, {Name: "bob", PasswordHash: "$6$s$h"}}}},
		{"big contents", job.Job{Version: 1, Hostname: "h2", Files: big(60)}},
		{"big contents, config-2, meta_data", job.Job{Version: 1, Format: job.FormatConfigDrive, Hostname: "h3", Files: big(60), MetaData: map[string]any{"local-hostname": "x"}}},
		{"merged user-data and report", job.Job{Version: 1, Hostname: "h4", Files: big(60), UserData: "#cloud-config\nruncmd: [true]\n", GuestReport: &yes,
			Users: []job.User{{Name: "carol", Password: "pw"}}}},
		{"both, pinned instance-id", job.Job{Version: 1, Hostname: "h5", InstanceID: "iid-pinned", Files: big(60), Users: []job.User{{Name: "dave", Password: "pw"}}}},
	}
	defer cloudinit.SetInlineIdentities(false)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got [2]*cloudinit.Documents
			for k, inline := range []bool{true, false} {
				cloudinit.SetInlineIdentities(inline)
				d, err := render(c.j, payload.Options{})
				if err != nil {
					t.Fatalf("inline=%v: %v", inline, err)
				}
				got[k] = d
			}
			a, b := got[0], got[1]
			if a.ContentHash != b.ContentHash || a.InstanceID != b.InstanceID || !slices.Equal(a.PasswordHashes, b.PasswordHashes) {
				t.Errorf("identities differ: inline %s %s %q, concurrent %s %s %q", a.ContentHash, a.InstanceID, a.PasswordHashes, b.ContentHash, b.InstanceID, b.PasswordHashes)
			}
			if len(a.Files) != len(b.Files) {
				t.Fatalf("inline gives %d documents, concurrent %d", len(a.Files), len(b.Files))
			}
			for i := range a.Files {
				if a.Files[i].Path != b.Files[i].Path || !bytes.Equal(a.Files[i].Data, b.Files[i].Data) {
					t.Errorf("document %s differs between the inline and the concurrent derivation", a.Files[i].Path)
				}
			}
			if a.ContentHash == "" || a.InstanceID == "" {
				t.Errorf("empty identity: %q %q", a.ContentHash, a.InstanceID)
			}
		})
	}
}
