package jobs

import (
	"context"
	"sync"
	"time"
)

// Event tells a subscriber that a job changed. Events are coalesced: one
// Event may stand for many output appends and progress reports.
type Event struct {
	JobID    string
	Status   Status
	Output   bool      // output grew since the last event
	Progress *Progress // newest progress, when it changed since the last event
	Done     bool      // the job reached its final status
}

// merge folds a newer event into an older pending one.
func (e Event) merge(newer Event) Event {
	e.Status = newer.Status
	e.Output = e.Output || newer.Output
	if newer.Progress != nil {
		e.Progress = newer.Progress
	}
	e.Done = e.Done || newer.Done
	return e
}

// hub fans job changes out to subscriptions. Why coalescing here: output can
// arrive thousands of times per second, while MCP clients want at most a few
// notifications/resources/updated per second; each subscription delivers
// the merged state at most once per interval.
type hub struct {
	interval time.Duration
	mu       sync.Mutex
	subs     map[*subscription]struct{}
}

func newHub(interval time.Duration) *hub {
	return &hub{interval: interval, subs: map[*subscription]struct{}{}}
}

type subscription struct {
	h     *hub
	jobID string // "" for every job
	out   chan Event
	wake  chan struct{}
	stop  chan struct{}
	once  sync.Once

	mu      sync.Mutex
	pending map[string]Event
	order   []string
}

func (h *hub) subscribe(jobID string) *subscription {
	s := &subscription{
		h:       h,
		jobID:   jobID,
		out:     make(chan Event, 16),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		pending: map[string]Event{},
	}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	go s.loop()
	return s
}

func (h *hub) publish(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.jobID == "" || s.jobID == ev.JobID {
			s.add(ev)
		}
	}
}

func (h *hub) closeAll() {
	h.mu.Lock()
	subs := h.subs
	h.subs = map[*subscription]struct{}{}
	h.mu.Unlock()
	for s := range subs {
		s.cancel()
	}
}

func (s *subscription) add(ev Event) {
	s.mu.Lock()
	if old, ok := s.pending[ev.JobID]; ok {
		s.pending[ev.JobID] = old.merge(ev)
	} else {
		s.pending[ev.JobID] = ev
		s.order = append(s.order, ev.JobID)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) take() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := make([]Event, 0, len(s.order))
	for _, id := range s.order {
		evs = append(evs, s.pending[id])
	}
	clear(s.pending)
	s.order = s.order[:0]
	return evs
}

func (s *subscription) cancel() {
	s.once.Do(func() {
		s.h.mu.Lock()
		delete(s.h.subs, s)
		s.h.mu.Unlock()
		close(s.stop)
	})
}

// loop delivers pending events, then rests for the interval so that bursts
// coalesce. A single-job subscription ends after the job's final event.
func (s *subscription) loop() {
	defer close(s.out)
	rest := time.NewTimer(0)
	defer rest.Stop()
	for {
		select {
		case <-s.wake:
		case <-s.stop:
			return
		}
		for _, ev := range s.take() {
			select {
			case s.out <- ev:
			case <-s.stop:
				return
			}
			if ev.Done && s.jobID != "" {
				s.cancel()
				return
			}
		}
		rest.Reset(s.h.interval)
		select {
		case <-rest.C:
		case <-s.stop:
			return
		}
	}
}

// Subscribe returns a channel of coalesced change events (at most one
// delivery per Config.NotifyInterval) and a function that ends the
// subscription. With a job id the channel closes after that job's final
// event; with "" it carries events of every job until cancelled or the
// Manager closes. The caller must keep receiving or cancel.
func (m *Manager) Subscribe(ctx context.Context, id string) (<-chan Event, func(), error) {
	s := m.hub.subscribe(id)
	if id != "" {
		// Registered first, then checked: a job ending in between still
		// produces its final event.
		j, err := m.Get(ctx, id)
		if err != nil {
			s.cancel()
			return nil, nil, err
		}
		if j.Status.Terminal() {
			s.add(Event{JobID: id, Status: j.Status, Done: true})
		}
	}
	return s.out, s.cancel, nil
}
