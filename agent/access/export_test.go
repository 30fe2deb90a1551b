package access

import "github.com/vmpayload/vmpayload/agent/result"

// Privileged reports whether s may use privileged fields and every secret
// (privileged, with s's groups from the group database).
func (p Policy) Privileged(s result.Submitter) bool {
	return p.privileged(s, func() []uint32 {
		gids, _ := p.groups(s.UID) // a uid the database does not know is in no group
		return gids
	})
}
