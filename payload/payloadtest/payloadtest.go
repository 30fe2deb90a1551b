// Package payloadtest renders and builds payload images for tests and
// benchmarks that hold a decoded job, the way every caller must: through
// payload.Check (with the options `vmpayload build` uses), then the
// renderer, which takes only a checked job.
package payloadtest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// Check checks j as `vmpayload build --secrets-dir secretsDir` does and
// returns the checked job, or the report as a *job.ValidationError.
func Check(j *job.Job, secretsDir string) (*payload.Checked, error) {
	c, rep := payload.CheckJob(j, payload.CheckOptions{Secrets: true, SecretsDir: secretsDir, Build: true})
	if !rep.OK() {
		return nil, rep.Err()
	}
	return c, nil
}

// Render is Check followed by payload.Render.
func Render(j *job.Job, secretsDir string, opt payload.Options) (*payload.Rendered, error) {
	c, err := Check(j, secretsDir)
	if err != nil {
		return nil, err
	}
	return payload.Render(c, opt)
}

// Build is Check followed by payload.Build.
func Build(ctx context.Context, j *job.Job, secretsDir, out string, opt payload.Options) (payload.Result, error) {
	c, err := Check(j, secretsDir)
	if err != nil {
		return payload.Result{}, err
	}
	return payload.Build(ctx, c, out, opt)
}

// RenderRefusal checks an error payload.Render gave a checked job: nil
// when err is nil or the one refusal the renderer may make (documents over
// the image limit: a *job.ValidationError naming no field), else an error
// saying why err should not have happened.
func RenderRefusal(err error) error {
	if err == nil {
		return nil
	}
	var ve *job.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("a checked job fails to render with a non-validation error: %w", err)
	}
	for _, e := range ve.Errors {
		if e.Field != "" {
			return fmt.Errorf("the renderer refused a checked job for a field the check passed: %w", err)
		}
	}
	return nil
}

// FuzzSalt is the fixed password-hash salt the fuzz targets render with.
func FuzzSalt() (string, error) { return "fuzzsaltfuzzsalt", nil }

// FuzzRender renders c as the fuzz targets do (with FuzzSalt): nil when the
// renderer refused it as it may (RenderRefusal); any other error fails tb.
func FuzzRender(tb testing.TB, c *payload.Checked) *payload.Rendered {
	tb.Helper()
	r, err := payload.Render(c, payload.Options{Salt: FuzzSalt})
	if e := RenderRefusal(err); e != nil {
		tb.Fatal(e)
	}
	if err != nil {
		return nil
	}
	return r
}
