//go:build tools

// Package tools pins the packaging tools (nfpm) used by packaging/build.sh.
package tools

import (
	_ "github.com/goreleaser/nfpm/v2/cmd/nfpm"
)
