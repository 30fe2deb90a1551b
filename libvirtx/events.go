// Lifecycle events: libvirt's default event loop, the callback that turns
// libvirt's lifecycle events into Events, and their delivery through a
// bounded queue (HostOptions.MaxQueuedEvents) so that libvirt's callback
// never blocks.

package libvirtx

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"libvirt.org/go/libvirt"
)

// EventType is the kind of a Host event.
type EventType int

// String names the event type.
func (t EventType) String() string {
	switch t {
	case EventDefined:
		return "defined"
	case EventUndefined:
		return "undefined"
	case EventStarted:
		return "started"
	case EventStopped:
		return "stopped"
	case EventDisconnected:
		return "disconnected"
	case EventReconnected:
		return "reconnected"
	}
	return "unknown"
}

// StoppedMigrated is the Detail of an EventStopped whose domain left this
// host by migration (libvirt's VIR_DOMAIN_EVENT_STOPPED_MIGRATED). With
// --undefinesource libvirt then removes the definition without an
// EventUndefined.
const StoppedMigrated = int(libvirt.DOMAIN_EVENT_STOPPED_MIGRATED)

// Event is a domain lifecycle or connection event. Name and UUID are empty for
// connection events. Detail is libvirt's event detail code.
type Event struct {
	Type   EventType
	Name   string
	UUID   string
	Detail int
	// Renamed marks the EventUndefined (old name) and EventDefined (new
	// name) that libvirt sends for a rename (virDomainRename, virsh
	// domrename): the domain lives on with the same UUID, definition and
	// files; only its name changed.
	Renamed bool
	// Saved marks the EventStopped of a domain whose state was saved
	// (virsh save, managedsave): it resumes later with the files its QEMU
	// was started with.
	Saved bool
}

var (
	eventLoopOnce sync.Once
	eventLoopErr  error
)

// startEventLoop registers libvirt's default event loop once per process and
// runs it in a goroutine for the life of the process.
func startEventLoop() error {
	eventLoopOnce.Do(func() {
		if eventLoopErr = libvirt.EventRegisterDefaultImpl(); eventLoopErr != nil {
			eventLoopErr = fmt.Errorf("registering libvirt default event loop: %w", eventLoopErr)
			return
		}
		go func() {
			for {
				if err := libvirt.EventRunDefaultImpl(); err != nil {
					slog.Error("libvirt event loop iteration failed", "err", err)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	})
	return eventLoopErr
}

// lifecycleEvents are the libvirt lifecycle events passed on as Host events.
var lifecycleEvents = map[libvirt.DomainEventType]EventType{
	libvirt.DOMAIN_EVENT_DEFINED: EventDefined, libvirt.DOMAIN_EVENT_UNDEFINED: EventUndefined,
	libvirt.DOMAIN_EVENT_STARTED: EventStarted, libvirt.DOMAIN_EVENT_STOPPED: EventStopped,
}

// onLifecycle turns libvirt lifecycle events into Host events. It runs on
// the event loop and must not block.
func (h *LibvirtHost) onLifecycle(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventLifecycle) {
	t, ok := lifecycleEvents[ev.Event]
	if !ok {
		return
	}
	name, err := d.GetName()
	if err != nil {
		h.log.Warn("reading name of event domain", "err", err)
	}
	uuid, err := d.GetUUIDString()
	if err != nil {
		h.log.Warn("reading UUID of event domain", "err", err)
	}
	if t == EventUndefined && uuid != "" {
		h.forgetHandle(uuid)
	}
	renamed := (t == EventUndefined && ev.Detail == int(libvirt.DOMAIN_EVENT_UNDEFINED_RENAMED)) ||
		(t == EventDefined && ev.Detail == int(libvirt.DOMAIN_EVENT_DEFINED_RENAMED))
	saved := t == EventStopped && ev.Detail == int(libvirt.DOMAIN_EVENT_STOPPED_SAVED)
	h.emit(Event{Type: t, Name: name, UUID: uuid, Detail: ev.Detail, Renamed: renamed, Saved: saved})
}

// emit queues an event for delivery on Events without blocking.
func (h *LibvirtHost) emit(ev Event) {
	h.evMu.Lock()
	if len(h.evQueue) >= h.opts.MaxQueuedEvents {
		h.log.Warn("event queue full; dropping oldest event", "dropped", h.evQueue[0].Type.String())
		h.evQueue = h.evQueue[1:]
	}
	h.evQueue = append(h.evQueue, ev)
	h.evMu.Unlock()
	select {
	case h.evSignal <- struct{}{}:
	default:
	}
}

// pump delivers queued events in order until Close.
func (h *LibvirtHost) pump() {
	defer h.wg.Done()
	for {
		select {
		case <-h.done:
			return
		case <-h.evSignal:
		}
		for {
			h.evMu.Lock()
			if len(h.evQueue) == 0 {
				h.evMu.Unlock()
				break
			}
			ev := h.evQueue[0]
			h.evQueue = h.evQueue[1:]
			h.evMu.Unlock()
			select {
			case h.events <- ev:
			case <-h.done:
				return
			}
		}
	}
}

// Events implements Host.
func (h *LibvirtHost) Events() <-chan Event { return h.events }
