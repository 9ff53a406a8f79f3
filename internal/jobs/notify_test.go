package jobs

import (
	"context"
	"testing"
)

func TestSubscriptionCoalescesAndEndsWithJob(t *testing.T) {
	m, f, _ := openTest(t, func(c *Config) { c.NotifyInterval = 250 * 1e6 })
	ctx := context.Background()
	j, _ := m.Start(ctx, code("x"), "")
	c := f.next(t)
	events, unsub, err := m.Subscribe(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	const writes = 200
	for i := 0; i < writes; i++ {
		c.stdout(t, "x\n")
	}
	c.exit(t, 0)
	var n int
	var sawOutput bool
	var last Event
	for ev := range events { // closes after the final event
		n++
		sawOutput = sawOutput || ev.Output
		last = ev
	}
	if !sawOutput || !last.Done || last.Status != StatusCompleted {
		t.Fatalf("events: output seen %v, last %+v", sawOutput, last)
	}
	if n >= writes {
		t.Fatalf("%d events for %d writes: not coalesced", n, writes)
	}
}

func TestSubscribeFinishedAndUnknownJobs(t *testing.T) {
	m, f, _ := openTest(t, nil)
	ctx := context.Background()
	if _, _, err := m.Subscribe(ctx, "missing"); err == nil {
		t.Fatal("subscribe to unknown job succeeded")
	}
	j, _ := m.Start(ctx, code("x"), "")
	f.next(t).exit(t, 0)
	waitDone(t, m, j.ID)
	events, unsub, err := m.Subscribe(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	ev, ok := <-events
	if !ok || !ev.Done || ev.Status != StatusCompleted {
		t.Fatalf("event for finished job = %+v, %v", ev, ok)
	}
	if _, ok := <-events; ok {
		t.Fatal("channel not closed after the final event")
	}
}

func TestSubscribeAllSeesEveryJob(t *testing.T) {
	m, f, _ := openTest(t, nil)
	ctx := context.Background()
	events, unsub, err := m.Subscribe(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := m.Start(ctx, code("a"), "")
	f.next(t).exit(t, 0)
	b, _ := m.Start(ctx, code("b"), "")
	f.next(t).exit(t, 0)
	done := map[string]bool{}
	for ev := range events {
		if ev.Done {
			done[ev.JobID] = true
		}
		if done[a.ID] && done[b.ID] {
			break
		}
	}
	unsub()
	for range events { // drains and ends: cancel closes the channel
	}
}
