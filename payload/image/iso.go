package image

import (
	"context"
	"fmt"
	"time"
)

const (
	isoBlock      = 2048
	isoPVDOffset  = 16 * isoBlock
	isoFileMode   = 0o444
	isoDirMode    = 0o555
	maxImageBytes = MaxContentBytes + 16<<20 // hard cap on any image we build
)

// buildISO renders spec into an ISO9660 image in layout v in memory with
// the package's writer (isowriter.go) and returns its bytes. The content
// stamp is hashed on a second goroutine while the image is laid out.
func buildISO(ctx context.Context, spec Spec, dirs []string, v isoVariant) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("build iso: %w", err)
	}
	stampc := make(chan time.Time, 1)
	go func() {
		t, _ := Stamp(spec)
		stampc <- t
	}()
	// stampc is buffered: the goroutine ends even when layoutISO fails
	// before it reads the stamp.
	return layoutISO(spec, dirs, func() time.Time { return <-stampc }, v)
}
