package agent_test

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/libvirtx"
)

// sample returns the value of the series of h's /metrics exposition whose
// line starts with series (name and labels, e.g.
// `vmpayload_health_degraded{area="results"}`), failing when there is none.
func (h *harness) sample(series string) string {
	h.t.Helper()
	var b bytes.Buffer
	if _, err := h.met.WriteTo(&b); err != nil {
		h.t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	h.t.Fatalf("no series %s in the exposition:\n%s", series, b.String())
	return ""
}

// degradedSeries returns the vmpayload_health_degraded samples by area.
func (h *harness) degradedSeries() map[string]string {
	h.t.Helper()
	m := map[string]string{}
	for _, area := range metrics.Areas {
		m[area] = h.sample(`vmpayload_health_degraded{area="` + area + `"}`)
	}
	return m
}

// switchHost is a libvirt host whose connection state the test sets: the
// LibvirtHost's own Connected() is replaced (libvirtx tests its reconnect
// machinery with injected dial failures; here only what the agent makes of
// the state matters).
type switchHost struct {
	libvirtx.Host
	down atomic.Bool
}

func (s *switchHost) Connected() bool { return !s.down.Load() }

// TestLibvirtConnectedGauge: vmpayload_libvirt_connected follows the
// connection state, 0 while it is down and 1 again once it is back, and
// agrees with /healthz's "libvirt" each time; with libvirt_timeout set the
// state is read through the bounding wrapper.
func TestLibvirtConnectedGauge(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Minute} {
		t.Run("libvirt_timeout="+timeout.String(), func(t *testing.T) {
			var sw *switchHost
			h := startAgentWith(t, "", nil, agentSetup{
				wrap: func(lh *libvirtx.LibvirtHost) libvirtx.Host { sw = &switchHost{Host: lh}; return sw },
				opts: func(o *agent.Options) { o.LibvirtTimeout = timeout },
			})
			for _, step := range []struct {
				down   bool
				gauge  string
				health string
			}{{false, "1", "connected"}, {true, "0", "disconnected"}, {false, "1", "connected"}, {true, "0", "disconnected"}} {
				sw.down.Store(step.down)
				if got := h.sample("vmpayload_libvirt_connected"); got != step.gauge {
					t.Errorf("connection down=%v: vmpayload_libvirt_connected %s, want %s", step.down, got, step.gauge)
				}
				if got := h.agent.Health()["libvirt"]; got != step.health {
					t.Errorf("connection down=%v: /healthz libvirt %v, want %s", step.down, got, step.health)
				}
			}
		})
	}
}
