package sysprep

import (
	"fmt"
	"strings"

	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	answer "github.com/vmpayload/vmpayload/payload/internal/sysprep"
	"github.com/vmpayload/vmpayload/payload/job"
)

func init() { cloudinit.RegisterRenderer(job.FormatSysprep, render) }

// render renders a job of format "sysprep": the answer file (in.Sysprep)
// with its placeholders filled, as the one file at the root of the
// medium, named by sysprep_file_name. Like an Ignition config it has no
// instance-id, but results and recipes name the image by one, derived as
// for cloud-init.
func render(j *job.Job, in cloudinit.Input, d cloudinit.Derived) (*cloudinit.Documents, error) {
	// the byte order mark Windows tools write is kept: the file goes to
	// the medium as the user gave it, placeholders aside
	text, bom := strings.CutPrefix(in.Sysprep, "\uFEFF")
	values := Values(j)
	values[answer.AdminPassword] = in.AdminPassword
	values[answer.DomainAdminPassword] = in.DomainAdminPassword
	values[answer.ProductKey] = in.ProductKey
	out, err := answer.Fill(text, values)
	if err != nil {
		// payload.Check refuses what could fail here; never quote the
		// text (it may hold the password now)
		return nil, fmt.Errorf("rendering the answer file: %w", redactFill(err))
	}
	if bom {
		out = "\uFEFF" + out
	}
	docs := &cloudinit.Documents{Format: j.Format, InstanceID: d.InstanceID, ContentHash: d.ContentHash}
	docs.Files = append(docs.Files, cloudinit.File{Path: j.SysprepFileName, Data: []byte(out)})
	limit, what := job.MaxContentBytes, "the image limit"
	if j.SysprepMedium == job.MediumFloppy {
		limit, what = image.FloppyCapacity, "what a 1.44 MB floppy holds"
	}
	if n := docs.Size(); n > limit {
		return nil, (&job.Report{Errors: []job.FieldError{{Code: job.CodeTooLarge,
			Message: fmt.Sprintf("the filled answer file is %d bytes; %s is %d (use sysprep_medium \"cdrom\")", n, what, limit)}}}).Err()
	}
	return docs, nil
}

// redactFill keeps the kind of a Fill error but drops any text of the
// filled file from it.
func redactFill(err error) error {
	if se, ok := err.(*answer.SyntaxError); ok {
		return fmt.Errorf("the filled answer file is not well-formed XML at line %d", se.Line)
	}
	return err
}
