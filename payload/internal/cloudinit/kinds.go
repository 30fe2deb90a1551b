package cloudinit

import "github.com/vmpayload/vmpayload/payload/job"

// A KindRenderer renders the documents of a kind that writes no cloud-init
// documents (an Ignition config, a sysprep answer file), from the job,
// the input and what Render derived for every kind. The kind's package
// registers it (RegisterRenderer).
type KindRenderer func(j *job.Job, in Input, d Derived) (*Documents, error)

// Derived is what Render derives of a job before its kind renders it.
type Derived struct {
	// InstanceID names the image in results and recipes: derived from
	// the instance hash as for cloud-init, or the pinned identity's.
	InstanceID string
	// ContentHash is Documents.ContentHash.
	ContentHash string
	// PasswordHashes returns the crypt(3) hash of each user's password
	// (Documents.PasswordHashes).
	PasswordHashes func() ([]string, error)
}

var renderers = map[job.Format]KindRenderer{}

// RegisterRenderer makes r render the jobs of format f; the kind's
// package calls it from its init.
func RegisterRenderer(f job.Format, r KindRenderer) { renderers[f] = r }
