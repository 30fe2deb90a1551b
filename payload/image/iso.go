package image

import (
	"context"
	"fmt"
)

const (
	isoBlock      = 2048
	isoPVDOffset  = 16 * isoBlock
	isoFileMode   = 0o444
	isoDirMode    = 0o555
	maxImageBytes = MaxContentBytes + 16<<20 // hard cap on any image we build
)

// buildISO renders spec into an ISO9660 image in layout v in memory with
// the package's writer (isowriter.go) and returns its bytes.
func buildISO(ctx context.Context, spec Spec, dirs []string, v isoVariant) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("build iso: %w", err)
	}
	t, _ := Stamp(spec)
	return layoutISO(spec, dirs, t, v)
}
