package engine

import (
	"maps"
	"slices"

	"github.com/vmpayload/vmpayload/agent/delivery/drive"
	"github.com/vmpayload/vmpayload/agent/delivery/fwcfg"
)

// NoticeFwCfgNextColdStart is the result's notice of a fw_cfg job done on a
// running domain; NoticeIgnitionFirstBoot follows it.
const NoticeFwCfgNextColdStart = fwcfg.NoticeNextColdStart

// maxResets bounds the resets one media change may do (drive.MaxResets).
const maxResets = drive.MaxResets

// DeferredUntilStop returns the files waiting for domain uuid to stop.
func (c *Cleanups) DeferredUntilStop(uuid string) []string {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.atStop[uuid]))
}
