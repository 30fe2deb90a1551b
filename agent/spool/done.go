package spool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/vmpayload/vmpayload/agent/result"
)

// EachDone calls fn with every readable result in done/, in no particular
// order. A file that cannot be read or decoded, or whose job id is not the
// one of its name (ID.json), is passed to bad (which may be nil) and
// skipped; only a failure to list done/ is an error. When ctx ends it stops
// and returns ctx's error. It is how the agent finds, at start-up, what the
// latest results of its domains say (the guest report follower, issue 14).
func (s *Spool) EachDone(ctx context.Context, fn func(result.Result), bad func(name string, err error)) error {
	d := s.Dir(Done)
	ents, err := os.ReadDir(d)
	if err != nil {
		return fmt.Errorf("listing %s: %w", d, err)
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") || !e.Type().IsRegular() {
			continue
		}
		var r result.Result
		b, err := os.ReadFile(d + "/" + name)
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err == nil && r.ID+".json" != name {
			err = fmt.Errorf("the result names job %q, not the one of its file name", r.ID)
		}
		if err != nil {
			if bad != nil {
				bad(name, err)
			}
			continue
		}
		fn(r)
	}
	return nil
}
