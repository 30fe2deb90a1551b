package engine

import (
	"sync"
	"time"
)

// Starts records when domains last started (or were reset), as seen by the
// agent: from its own starts and libvirt's lifecycle events. The engine uses
// it to tell a guest still in its firmware from one that has been running
// (see the drive delivery's changeMedia, agent/delivery/drive). The zero value is ready; a nil *Starts records
// nothing and knows nothing. Safe for concurrent use.
type Starts struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// Note records that domain uuid started at t.
func (s *Starts) Note(uuid string, t time.Time) {
	if s == nil || uuid == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]time.Time{}
	}
	s.m[uuid] = t
}

// Forget drops what is known about domain uuid (it was undefined).
func (s *Starts) Forget(uuid string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, uuid)
}

// Since returns how long ago domain uuid started, and whether that is known.
func (s *Starts) Since(uuid string) (time.Duration, bool) {
	if s == nil {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.m[uuid]
	if !ok {
		return 0, false
	}
	return time.Since(t), true
}
