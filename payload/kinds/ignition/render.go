package ignition

import (
	"fmt"

	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	"github.com/vmpayload/vmpayload/payload/internal/ignition"
	"github.com/vmpayload/vmpayload/payload/job"
)

func init() { cloudinit.RegisterRenderer(job.FormatIgnition, render) }

// render renders a job of format "ignition" from the password hashes and
// identities Render derived: the config generated from its fields with
// the user's config merged in (package internal/ignition), as the one
// file its delivery needs. An Ignition config has no instance-id, but
// results and recipes name the image by one, derived as for cloud-init.
func render(j *job.Job, in cloudinit.Input, d cloudinit.Derived) (*cloudinit.Documents, error) {
	hashes, err := d.PasswordHashes()
	if err != nil {
		return nil, err
	}
	docs := &cloudinit.Documents{Format: j.Format, InstanceID: d.InstanceID, ContentHash: d.ContentHash, PasswordHashes: hashes}
	ig := ignition.Input{Job: *j, PasswordHashes: hashes}
	for _, k := range in.HostKeys {
		docs.HostKeyPublics = append(docs.HostKeyPublics, k.Public)
		ig.HostKeys = append(ig.HostKeys, ignition.HostKey{Type: k.Type, Private: k.Private, Public: k.Public})
	}
	b, spec, err := ignition.Render(ig)
	if err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	docs.IgnitionSpec = spec.String()
	docs.Files = append(docs.Files, cloudinit.File{Path: cloudinit.IgnitionFile(j.IgnitionDelivery), Data: b})
	if n := docs.Size(); n > job.MaxContentBytes {
		return nil, (&job.Report{Errors: []job.FieldError{{Code: job.CodeTooLarge,
			Message: fmt.Sprintf("the Ignition config is %d bytes; the limit is %d", n, job.MaxContentBytes)}}}).Err()
	}
	return docs, nil
}
