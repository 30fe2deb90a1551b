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

// Policy is the access policy. The zero value allows privileged fields to
// root and the agent's own user only.
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

// Privileged reports whether s may use privileged fields: root, the agent's
// own user (who can do all the agent does anyway), and members of the
// administrators' group, by primary group or by the group database.
func (p Policy) Privileged(s result.Submitter) bool {
	if s.UID == 0 || int(s.UID) == os.Geteuid() {
		return true
	}
	if !p.HasAdmin || p.AdminGID < 0 {
		return false
	}
	if int(s.GID) == p.AdminGID {
		return true
	}
	groupsOf := p.groupsOf
	if groupsOf == nil {
		groupsOf = userGroups
	}
	gids, err := groupsOf(s.UID)
	return err == nil && slices.Contains(gids, strconv.Itoa(p.AdminGID))
}

func userGroups(uid uint32) ([]string, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return nil, fmt.Errorf("looking up the groups of uid %d: %w", uid, err)
	}
	return u.GroupIds()
}

// Check returns one field error with code "forbidden" for each privileged
// field of j that s may not use; none when s may submit j.
func (p Policy) Check(j *job.Job, s result.Submitter) []job.FieldError {
	var errs []job.FieldError
	privileged := -1 // unknown until a privileged field is seen
	for _, f := range privilegedFields {
		if !f.set(j) {
			continue
		}
		if privileged < 0 {
			privileged = 0
			if p.Privileged(s) {
				privileged = 1
			}
		}
		if privileged == 1 {
			continue
		}
		errs = append(errs, job.FieldError{Field: f.name, Code: result.CodeForbidden,
			Message: fmt.Sprintf("%s is allowed only to root and the admin_group; %s (%s) may not use it: it %s", f.name, Describe(s), s.Via, f.why)})
	}
	return errs
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
