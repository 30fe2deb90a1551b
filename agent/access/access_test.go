package access

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/job"
)

func TestPolicyCheck(t *testing.T) {
	const admin = 4242
	groups := map[uint32][]string{2001: {"2001", "4242"}, 2002: {"2002"}}
	groupsOf := func(uid uint32) ([]string, error) {
		if g, ok := groups[uid]; ok {
			return g, nil
		}
		return nil, errors.New("no such user")
	}
	xmlJob := &job.Job{Domain: "d", DomainXML: "<domain/>"}
	imgJob := &job.Job{Domain: "d", PrebuiltImage: "/srv/seed.iso"}
	both := &job.Job{Domain: "d", DomainXML: "<domain/>", PrebuiltImage: "/srv/seed.iso"}
	plain := &job.Job{Domain: "d", Hostname: "h"}
	tests := []struct {
		name      string
		adminGID  int
		who       result.Submitter
		j         *job.Job
		forbidden []string // fields refused
	}{
		{"root may define", -1, result.Submitter{UID: 0, GID: 0}, both, nil},
		{"agent's own user may define", -1, result.Submitter{UID: uint32(os.Geteuid())}, both, nil},
		{"plain user: domain_xml", admin, result.Submitter{UID: 2002, GID: 2002}, xmlJob, []string{"domain_xml"}},
		{"plain user: prebuilt_image", admin, result.Submitter{UID: 2002, GID: 2002}, imgJob, []string{"prebuilt_image"}},
		{"plain user: both", admin, result.Submitter{UID: 2002, GID: 2002}, both, []string{"domain_xml", "prebuilt_image"}},
		{"plain user: payload for an existing domain", admin, result.Submitter{UID: 2002, GID: 2002}, plain, nil},
		{"admin by primary group", admin, result.Submitter{UID: 3000, GID: admin}, both, nil},
		{"admin by group database", admin, result.Submitter{UID: 2001, GID: 2001}, both, nil},
		{"no admin group: member of 4242 refused", -1, result.Submitter{UID: 2001, GID: admin}, xmlJob, []string{"domain_xml"}},
		{"unknown user, not admin", admin, result.Submitter{UID: 9999, GID: 9999}, imgJob, []string{"prebuilt_image"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPolicy(tt.adminGID)
			p.groupsOf = groupsOf
			errs := p.Check(tt.j, tt.who)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
				if e.Code != result.CodeForbidden || !strings.Contains(e.Message, e.Field) || !strings.Contains(e.Message, "admin_group") {
					t.Errorf("field error %+v: want code forbidden and a message naming the field and admin_group", e)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.forbidden, ",") {
				t.Errorf("forbidden fields = %v; want %v", got, tt.forbidden)
			}
		})
	}
}

func TestZeroPolicyIsRootOnly(t *testing.T) {
	var p Policy
	if p.Privileged(result.Submitter{UID: 65534, GID: 0}) {
		t.Error("the zero policy treats gid 0 as an admin group")
	}
	if !p.Privileged(result.Submitter{UID: 0}) {
		t.Error("the zero policy refuses root")
	}
}

func TestPeerCred(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := net.Dial("unix", sock)
		if err == nil {
			defer c.Close()
			buf := make([]byte, 1)
			c.Read(buf)
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	who, err := PeerCred(c)
	if err != nil {
		t.Fatal(err)
	}
	if int(who.UID) != os.Geteuid() || int(who.GID) != os.Getegid() || int(who.PID) != os.Getpid() || who.Via != ViaPeerCred {
		t.Errorf("PeerCred = %+v; want uid %d gid %d pid %d via peercred", who, os.Geteuid(), os.Getegid(), os.Getpid())
	}
	if _, err := PeerCred(&net.TCPConn{}); err == nil {
		t.Error("PeerCred of a TCP connection succeeded")
	}
}

func TestFileOwnerNamesUser(t *testing.T) {
	s := FileOwner(0, 0)
	if s.Via != ViaFileOwner || s.User != "root" {
		t.Errorf("FileOwner(0, 0) = %+v; want user root via file_owner", s)
	}
	if got := Describe(result.Submitter{UID: 7}); got != "uid 7" {
		t.Errorf("Describe = %q", got)
	}
}
