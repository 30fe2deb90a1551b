// Package access decides who may ask the agent for what: it learns who
// submitted a job (the API peer's SO_PEERCRED credentials, or a spool file's
// owner) and applies the privileged-field policy of docs/security.md.
package access

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/job"
)

// How a Submitter was learned (result.Submitter.Via).
const (
	ViaPeerCred  = "peercred"
	ViaFileOwner = "file_owner"
)

// PeerCred returns the credentials of the process at the other end of a
// unix socket connection (SO_PEERCRED: taken by the kernel when the client
// connected, so the client cannot forge them).
func PeerCred(c net.Conn) (result.Submitter, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return result.Submitter{}, fmt.Errorf("reading peer credentials: %T is not a unix socket connection", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return result.Submitter{}, fmt.Errorf("reading peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return result.Submitter{}, fmt.Errorf("reading peer credentials: %w", err)
	}
	if serr != nil {
		return result.Submitter{}, fmt.Errorf("reading peer credentials (SO_PEERCRED): %w", serr)
	}
	return named(result.Submitter{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid, Via: ViaPeerCred}), nil
}

// FileOwner returns the owner of a spool file (uid, gid) as its submitter.
func FileOwner(uid, gid uint32) result.Submitter {
	return named(result.Submitter{UID: uid, GID: gid, Via: ViaFileOwner})
}

// named fills in the user name when the user database knows the uid.
func named(s result.Submitter) result.Submitter {
	if u, err := user.LookupId(strconv.FormatUint(uint64(s.UID), 10)); err == nil {
		s.User = u.Username
	}
	return s
}

// Privileged fields of a job: each makes libvirt or the agent open a host
// path or define host-level configuration, which is root's power (a
// domain_xml can give a guest any host file or block device as a disk).
// Every field added to the job format that does so belongs here.
var privilegedFields = []struct {
	name string
	set  func(*job.Job) bool
	why  string
}{
	{"domain_xml", func(j *job.Job) bool { return j.DomainXML != "" }, "defines a domain, which can give a guest any host file or device"},
	{"prebuilt_image", func(j *job.Job) bool { return j.PrebuiltImage != "" }, "makes the agent attach a host file"},
}

// Policy is the access policy. The zero value allows privileged fields and
// every secret to root and the agent's own user only.
type Policy struct {
	// AdminGID is the group whose members may use privileged fields
	// (config admin_group); -1 or unset (with HasAdmin false) means none.
	AdminGID int
	HasAdmin bool
	// groupsOf returns the group ids of a uid; tests replace it.
	groupsOf func(uid uint32) ([]string, error)
}

// NewPolicy returns the policy with administrators' group gid (-1: none).
func NewPolicy(adminGID int) Policy {
	return Policy{AdminGID: adminGID, HasAdmin: adminGID >= 0}
}

// privileged reports whether s may use privileged fields and every secret:
// root, the agent's own user (who can do all the agent does anyway), and
// members of the administrators' group in the group database (groups, the
// getgrouplist of s.UID, called only when needed, which includes the user's
// passwd primary group). s.GID never counts: it is a spool file's group or
// a process's primary group, which a non-member can have (chgrp to a group
// one left, setgid programs), and membership must end when the group
// database says so.
func (p Policy) privileged(s result.Submitter, groups func() []uint32) bool {
	if s.UID == 0 || int(s.UID) == os.Geteuid() {
		return true
	}
	if !p.HasAdmin || p.AdminGID < 0 {
		return false
	}
	return slices.Contains(groups(), uint32(p.AdminGID))
}

// groups returns the group ids of uid from the group database.
func (p Policy) groups(uid uint32) ([]uint32, error) {
	groupsOf := p.groupsOf
	if groupsOf == nil {
		groupsOf = userGroups
	}
	names, err := groupsOf(uid)
	if err != nil {
		return nil, err
	}
	gids := make([]uint32, 0, len(names))
	for _, g := range names {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			gids = append(gids, uint32(n))
		}
	}
	return gids, nil
}

func userGroups(uid uint32) ([]string, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return nil, fmt.Errorf("looking up the groups of uid %d: %w", uid, err)
	}
	return u.GroupIds()
}

// Check returns one field error with code "forbidden" for each privileged
// field of j that s may not use, and for each secret j names (job.Job
// SecretRefs) that s may not use; none when s may submit j. secretsDir is
// the agent's secrets_dir. A secret may be used by whoever could read its
// file (MayUseSecret); root, the agent's user and admin_group members may
// use any. Check reads no secret: call it before anything resolves the
// job's secrets, so that a refused job learns nothing about them.
func (p Policy) Check(j *job.Job, s result.Submitter, secretsDir string) []job.FieldError {
	var errs []job.FieldError
	// the group database is asked once, and only when needed
	groups := sync.OnceValue(func() []uint32 {
		gids, _ := p.groups(s.UID) // a uid the database does not know is in no group
		return gids
	})
	// unknown until a privileged field or a secret is seen
	isPrivileged := sync.OnceValue(func() bool { return p.privileged(s, groups) })
	for _, f := range privilegedFields {
		if !f.set(j) || isPrivileged() {
			continue
		}
		errs = append(errs, job.FieldError{Field: f.name, Code: result.CodeForbidden,
			Message: fmt.Sprintf("%s is allowed only to root and the admin_group; %s (%s) may not use it: it %s", f.name, Describe(s), s.Via, f.why)})
	}
	refs := j.SecretRefs()
	if len(refs) == 0 || isPrivileged() {
		return errs
	}
	for _, r := range refs {
		if MayUseSecret(secretsDir, r.Name, s.UID, groups()) {
			continue
		}
		// the same words whether the secret is missing, not a regular
		// file or not readable by s: no answer tells which secrets exist
		errs = append(errs, job.FieldError{Field: r.Field, Code: result.CodeForbidden,
			Message: fmt.Sprintf("%s: %s (%s) may not use secret %q: it is not a regular file in secrets_dir that this uid could read itself (its owner, group and mode decide; only root and the admin_group may use any secret)",
				r.Field, Describe(s), s.Via, r.Name)})
	}
	return errs
}

// MayUseSecret reports whether uid, a member of groups, may use the secret
// called name in secrets directory dir: it names a regular file there (a
// symlink, directory or device is never a secret, as payload/secrets reads
// them) that uid could read by its owner, group and mode (CanRead). The
// file itself is looked at (fstatat relative to the opened directory,
// without following a symlink), so the answer is about the inode the
// agent would read. POSIX ACLs are not consulted.
func MayUseSecret(dir, name string, uid uint32, groups []uint32) bool {
	if dir == "" || !job.ValidSecretName(name) {
		return false
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG && CanRead(uid, groups, st.Uid, st.Gid, st.Mode)
}

// CanRead reports whether a process of uid whose groups are groups may
// read a file of owner, group and mode by the permission bits, in POSIX
// order: the owner bits if uid owns the file, else the group bits if one
// of groups is the file's group, else the other bits; the first class
// that matches decides, even when a later one would allow more. Root's
// override is not applied here (the policy lets root use any secret).
func CanRead(uid uint32, groups []uint32, owner, group, mode uint32) bool {
	switch {
	case uid == owner:
		return mode&0o400 != 0
	case slices.Contains(groups, group):
		return mode&0o040 != 0
	default:
		return mode&0o004 != 0
	}
}

// Describe names a submitter for messages and logs: "alice (uid 1001)".
func Describe(s result.Submitter) string {
	if s.User != "" {
		return fmt.Sprintf("%s (uid %d)", s.User, s.UID)
	}
	return fmt.Sprintf("uid %d", s.UID)
}

// ForbiddenError is returned when a job uses fields its submitter may not.
type ForbiddenError struct {
	Errors []job.FieldError
}

func (e *ForbiddenError) Error() string {
	if len(e.Errors) == 0 {
		return "forbidden"
	}
	return "forbidden: " + e.Errors[0].Message
}
