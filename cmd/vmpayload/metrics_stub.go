package main

import (
	"io"
	"time"

	"github.com/vmpayload/vmpayload/libvirtx"
)

// agentMetrics adapts the metrics registry to agent.Metrics.
type agentMetrics struct{ host libvirtx.Host }

func newAgentMetrics(h libvirtx.Host) *agentMetrics { return &agentMetrics{host: h} }

func (m *agentMetrics) write(w io.Writer)                 {}
func (m *agentMetrics) BuildDone(time.Duration)           {}
func (m *agentMetrics) AttachDone(time.Duration)          {}
func (m *agentMetrics) ImageRemoved(string)               {}
func (m *agentMetrics) Retry()                            {}
func (m *agentMetrics) JobReceived(string)                {}
func (m *agentMetrics) JobFinished(string, time.Duration) {}
func (m *agentMetrics) QueueDepth(int)                    {}
func (m *agentMetrics) InFlight(int)                      {}
