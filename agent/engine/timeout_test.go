package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/payload/job"
)

// downHost is a Host whose calls all find libvirt unreachable.
type downHost struct{ libvirtx.Host }

func (downHost) Domain(ctx context.Context, n string) (libvirtx.DomainInfo, error) {
	return libvirtx.DomainInfo{}, fmt.Errorf("looking up domain %s: %w", n, libvirtx.ErrDisconnected)
}

// TestUnreachableLibvirtIsBounded: with LibvirtTimeout set, a job does not
// retry an unreachable libvirt for ever but fails with libvirt_timeout; with
// none it waits until its context ends and leaves no result.
func TestUnreachableLibvirtIsBounded(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		want    result.State // "" : no result, ctx's error
	}{
		{"bounded", 200 * time.Millisecond, result.StateFailed},
		{"unbounded", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Engine{Host: downHost{}, PayloadDir: t.TempDir(), ImageGID: -1, RetryBackoff: 10 * time.Millisecond,
				LibvirtTimeout: tt.timeout, Log: quietLog()}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			j, rep := job.Parse([]byte(`{"version":1,"domain":"d","hostname":"h"}`))
			if !rep.OK() {
				t.Fatal(rep.Err())
			}
			r, err := e.Run(ctx, j, result.Result{ID: "t"})
			if tt.want == "" {
				if err == nil {
					t.Fatalf("result %+v; want ctx's error", r)
				}
				return
			}
			if err != nil || r.State != tt.want || r.Error == nil || r.Error.Code != result.CodeLibvirtTimeout ||
				!strings.Contains(r.Error.Message, "unreachable") || r.Attempts < 2 {
				t.Fatalf("result %s %+v (attempts %d), %v; want failed libvirt_timeout after retries", r.State, r.Error, r.Attempts, err)
			}
		})
	}
}
