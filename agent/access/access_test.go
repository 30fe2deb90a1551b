package access

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/test/testenv"
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
		{"primary gid is not membership", admin, result.Submitter{UID: 3000, GID: admin}, both, []string{"domain_xml", "prebuilt_image"}},
		{"spool file's gid is not membership", admin, result.Submitter{UID: 2002, GID: admin, Via: ViaFileOwner}, xmlJob, []string{"domain_xml"}},
		{"admin by group database", admin, result.Submitter{UID: 2001, GID: 2001}, both, nil},
		{"no admin group: member of 4242 refused", -1, result.Submitter{UID: 2001, GID: admin}, xmlJob, []string{"domain_xml"}},
		{"unknown user, not admin", admin, result.Submitter{UID: 9999, GID: 9999}, imgJob, []string{"prebuilt_image"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPolicy(tt.adminGID)
			p.groupsOf = groupsOf
			errs := p.Check(tt.j, tt.who, "")
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
	l := testenv.ListenUnix(t, sock)
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

func TestCanRead(t *testing.T) {
	const me, other, mine, theirs = 1001, 1002, 2001, 2002
	tests := []struct {
		name         string
		groups       []uint32
		owner, group uint32
		mode         uint32
		want         bool
	}{
		{"owner, 0600", nil, me, theirs, 0o600, true},
		{"owner, 0400", nil, me, theirs, 0o400, true},
		{"owner without r, group and other allow", []uint32{theirs}, me, theirs, 0o044, false},
		{"root-only 0600, not owner", []uint32{mine}, 0, 0, 0o600, false},
		{"group 0640, member", []uint32{mine, theirs}, other, theirs, 0o640, true},
		{"group 0640, not member", []uint32{mine}, other, theirs, 0o640, false},
		{"group bits deny, other allow, member", []uint32{theirs}, other, theirs, 0o604, false},
		{"group bits deny, other allow, not member", []uint32{mine}, other, theirs, 0o604, true},
		{"other 0644", nil, other, theirs, 0o644, true},
		{"other without groups, 0640", nil, other, theirs, 0o640, false},
		{"write-only for all", []uint32{theirs}, me, theirs, 0o222, false},
		{"setuid bits do not read", nil, other, theirs, 0o4000 | 0o2000 | 0o1000, false},
	}
	for _, tt := range tests {
		if got := CanRead(me, tt.groups, tt.owner, tt.group, tt.mode); got != tt.want {
			t.Errorf("%s: CanRead(uid %d, groups %v, file %d:%d %#o) = %v, want %v", tt.name, me, tt.groups, tt.owner, tt.group, tt.mode, got, tt.want)
		}
	}
}

// TestMayUseSecret looks at real files: the inode in the directory, never
// what a symlink points to, regular files only.
func TestMayUseSecret(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "secrets")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	me, gid := uint32(os.Getuid()), uint32(os.Getgid())
	write := func(name string, mode os.FileMode) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("mine", 0o600)
	write("noread", 0o040)
	if err := os.WriteFile(filepath.Join(root, "outside"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "outside"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("mine", filepath.Join(dir, "relink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir, name string
		uid       uint32
		groups    []uint32
		want      bool
	}{
		{dir, "mine", me, nil, true},
		{dir, "mine", me + 1, []uint32{gid}, false}, // 0600: group bits deny
		{dir, "noread", me, []uint32{gid}, false},   // owner bits decide first
		{dir, "noread", me + 1, []uint32{gid}, true},
		{dir, "missing", me, nil, false},
		{dir, "link", me, nil, false},   // a symlink out of the directory
		{dir, "relink", me, nil, false}, // a symlink to a readable secret
		{dir, "sub", me, nil, false},
		{dir, "../outside", me, nil, false},
		{dir, "", me, nil, false},
		{"", "mine", me, nil, false},
		{filepath.Join(root, "nodir"), "mine", me, nil, false},
	}
	for _, tt := range tests {
		if got := MayUseSecret(tt.dir, tt.name, tt.uid, tt.groups); got != tt.want {
			t.Errorf("MayUseSecret(%s, %q, uid %d, %v) = %v, want %v", tt.dir, tt.name, tt.uid, tt.groups, got, tt.want)
		}
	}
}

// TestPolicyCheckSecrets: every secret field is checked, by its full path,
// with one message for a missing secret and one that may not be read;
// root, the agent's user and admins use any.
func TestPolicyCheckSecrets(t *testing.T) {
	dir := t.TempDir()
	const admin, member, plain = 4242, 2001, 2002
	me := uint32(os.Geteuid())
	for name, mode := range map[string]os.FileMode{"rootonly": 0o600, "shared": 0o644} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("s3cret\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	p := NewPolicy(admin)
	p.groupsOf = func(uid uint32) ([]string, error) {
		if uid == member {
			return []string{"2001", "4242"}, nil
		}
		return []string{strconv.Itoa(int(uid))}, nil
	}
	j := &job.Job{Domain: "d", UserDataSecret: "shared", AdminPasswordSecret: "rootonly", SysprepSecret: "missing",
		Users:       []job.User{{Name: "a", PasswordSecret: "shared"}, {Name: "b", PasswordSecret: "rootonly"}},
		SSHHostKeys: []job.SSHHostKey{{Type: "ed25519", PrivateKeySecret: "missing"}, {Type: "rsa", PrivateKeySecret: "rootonly"}}}
	refused := []string{"users[1].password_secret", "ssh_host_keys[0].private_key_secret", "ssh_host_keys[1].private_key_secret",
		"admin_password_secret", "sysprep_secret"}
	if me == plain || me == member {
		t.Skip("the test's uids collide with the process's")
	}
	errs := p.Check(j, result.Submitter{UID: plain, GID: admin, Via: ViaFileOwner}, dir)
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
		if e.Code != result.CodeForbidden || !strings.HasPrefix(e.Message, e.Field+": ") {
			t.Errorf("%+v: want code forbidden and the message naming the field", e)
		}
		if strings.Contains(e.Message, "s3cret") {
			t.Errorf("message quotes the secret: %s", e.Message)
		}
	}
	if strings.Join(got, ",") != strings.Join(refused, ",") {
		t.Errorf("refused %v; want %v", got, refused)
	}
	// The same words for a missing secret as for a root-only one.
	msg := map[string]string{}
	for _, e := range errs {
		msg[e.Field] = strings.ReplaceAll(strings.ReplaceAll(e.Message, "missing", "NAME"), "rootonly", "NAME")
		msg[e.Field] = strings.TrimPrefix(msg[e.Field], e.Field)
	}
	if msg["ssh_host_keys[0].private_key_secret"] != msg["ssh_host_keys[1].private_key_secret"] {
		t.Errorf("missing and unreadable secrets are told apart:\n%s\n%s", msg["ssh_host_keys[0].private_key_secret"], msg["ssh_host_keys[1].private_key_secret"])
	}
	for _, who := range []result.Submitter{{UID: 0}, {UID: me}, {UID: member, GID: member}} {
		if errs := p.Check(j, who, dir); errs != nil {
			t.Errorf("uid %d refused: %v", who.UID, errs)
		}
	}
}

// BenchmarkCheckSecrets: the policy's cost for a job naming five secrets,
// for a plain uid (group database lookup and five fstatat) — what every
// non-admin submission with secrets now pays before its secrets are read.
func BenchmarkCheckSecrets(b *testing.B) {
	dir := b.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	j := &job.Job{Domain: "d", UserDataSecret: "a", AdminPasswordSecret: "b", SysprepSecret: "missing",
		Users: []job.User{{Name: "u", PasswordSecret: "c"}}, SSHHostKeys: []job.SSHHostKey{{Type: "ed25519", PrivateKeySecret: "a"}}}
	p := NewPolicy(4242)
	who := result.Submitter{UID: 65534, GID: 65534}
	b.ReportAllocs()
	for b.Loop() {
		if errs := p.Check(j, who, dir); len(errs) != 1 {
			b.Fatalf("refused %v", errs)
		}
	}
}
