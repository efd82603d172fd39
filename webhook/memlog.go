package webhook

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"
)

// MemLog is the Log in this process: the instance's own log, lost with
// it, for a server without Redis and for tests.
type MemLog struct {
	mu        sync.Mutex
	next      uint64
	parts     [Partitions][]Entry           // appended, oldest first
	groups    map[string]*[Partitions]group // endpoint → its groups
	consumers map[string]time.Time
	endpoints map[string]Endpoint
	dead      []DeadLetter // oldest first
	counters  map[string]int64
	relayed   map[string]time.Time // AppendOnce's ids → when
	// relayedOrder: relayed's ids, oldest first.
	relayedOrder []string
	// Now is the clock of AppendOnce's memory; nil: time.Now.
	Now func() time.Time
}

type group struct {
	read    uint64            // entries up to this seq were handed out
	pending map[uint64]string // seq → consumer
}

// NewMemLog returns an empty in-process log.
func NewMemLog() *MemLog {
	return &MemLog{groups: map[string]*[Partitions]group{}, consumers: map[string]time.Time{},
		endpoints: map[string]Endpoint{}, counters: map[string]int64{}}
}

func seqOf(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }

// Append implements Log. Entries every group has been handed and acked
// are dropped.
func (m *MemLog) Append(_ context.Context, entries []Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.appendLocked(entries)
	return nil
}

func (m *MemLog) appendLocked(entries []Entry) {
	for _, e := range entries {
		m.next++
		e.Seq = strconv.FormatUint(m.next, 10)
		p := Partition(e.Event.Room)
		m.parts[p] = append(m.parts[p], e)
	}
	for p := range m.parts {
		m.trim(p)
	}
}

// AppendOnce implements Log, in one critical section: relays that race
// append each entry once, in order.
func (m *MemLog) AppendOnce(_ context.Context, entries []Entry) (int, error) {
	now := nowOf(m.Now)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.relayed == nil {
		m.relayed = map[string]time.Time{}
	}
	for len(m.relayedOrder) > 0 && m.relayed[m.relayedOrder[0]].Before(now.Add(-Retention)) {
		delete(m.relayed, m.relayedOrder[0])
		m.relayedOrder = m.relayedOrder[1:]
	}
	var fresh []Entry
	for _, e := range entries {
		if _, ok := m.relayed[e.Event.ID]; !ok {
			m.relayed[e.Event.ID] = now
			m.relayedOrder = append(m.relayedOrder, e.Event.ID)
			fresh = append(fresh, e)
		}
	}
	m.appendLocked(fresh)
	return len(fresh), nil
}

// trim drops the entries of partition p that no group still needs.
func (m *MemLog) trim(p int) {
	keep := m.next + 1
	for _, g := range m.groups {
		low := g[p].read + 1
		for seq := range g[p].pending {
			low = min(low, seq)
		}
		keep = min(keep, low)
	}
	i := 0
	for i < len(m.parts[p]) && seqOf(m.parts[p][i].Seq) < keep {
		i++
	}
	m.parts[p] = slices.Clip(m.parts[p][i:])
}

// AddGroup implements Log.
func (m *MemLog) AddGroup(_ context.Context, endpoint string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.groups[endpoint] == nil {
		var gs [Partitions]group
		for p := range gs {
			gs[p] = group{read: m.next, pending: map[uint64]string{}}
		}
		m.groups[endpoint] = &gs
	}
	return nil
}

// RemoveGroup implements Log.
func (m *MemLog) RemoveGroup(_ context.Context, endpoint string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.groups, endpoint)
	return nil
}

func (m *MemLog) group(endpoint string, p int) (*group, error) {
	gs := m.groups[endpoint]
	if gs == nil || p < 0 || p >= Partitions {
		return nil, fmt.Errorf("webhook: no group %s on partition %d", endpoint, p)
	}
	return &gs[p], nil
}

// Read implements Log.
func (m *MemLog) Read(_ context.Context, endpoint string, p int, consumer string, count int) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, err := m.group(endpoint, p)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, e := range m.parts[p] {
		if len(out) >= count {
			break
		}
		if seq := seqOf(e.Seq); seq > g.read {
			g.read = seq
			g.pending[seq] = consumer
			out = append(out, e)
		}
	}
	return out, nil
}

// Claim implements Log.
func (m *MemLog) Claim(_ context.Context, endpoint string, p int, consumer, after string, count int) ([]Entry, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, err := m.group(endpoint, p)
	if err != nil {
		return nil, "", err
	}
	from := seqOf(after)
	var out []Entry
	for _, e := range m.parts[p] {
		seq := seqOf(e.Seq)
		if _, ok := g.pending[seq]; !ok || seq <= from {
			continue
		}
		if len(out) >= count {
			return out, out[len(out)-1].Seq, nil
		}
		g.pending[seq] = consumer
		out = append(out, e)
	}
	return out, "", nil
}

// Ack implements Log.
func (m *MemLog) Ack(_ context.Context, endpoint string, p int, ids ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, err := m.group(endpoint, p)
	if err != nil {
		return err
	}
	for _, id := range ids {
		delete(g.pending, seqOf(id))
	}
	m.trim(p)
	return nil
}

// Consumers implements Log.
func (m *MemLog) Consumers(_ context.Context, id string, now time.Time, ttl time.Duration) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.consumers[id] = now.Add(ttl)
	var live []string
	for c, until := range m.consumers {
		if until.After(now) {
			live = append(live, c)
		} else {
			delete(m.consumers, c)
		}
	}
	slices.Sort(live)
	return live, nil
}

// PutEndpoint implements Log.
func (m *MemLog) PutEndpoint(_ context.Context, e Endpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endpoints[e.ID] = e
	return nil
}

// Endpoints implements Log.
func (m *MemLog) Endpoints(context.Context) ([]Endpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Collect(maps.Values(m.endpoints))
	sortEndpoints(out)
	return out, nil
}

// sortEndpoints orders endpoints oldest first.
func sortEndpoints(es []Endpoint) { slices.SortFunc(es, byCreated) }

func byCreated(a, b Endpoint) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// DeleteEndpoint implements Log.
func (m *MemLog) DeleteEndpoint(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.endpoints[id]; !ok {
		return ErrNotFound
	}
	delete(m.endpoints, id)
	return nil
}

// AddDead implements Log.
func (m *MemLog) AddDead(_ context.Context, d DeadLetter) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dead = append(m.dead, d)
	if len(m.dead) > MaxDead {
		m.dead = slices.Clone(m.dead[len(m.dead)-MaxDead:])
	}
	return nil
}

// Dead implements Log.
func (m *MemLog) Dead(_ context.Context, limit int) ([]DeadLetter, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []DeadLetter
	for i := len(m.dead) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, m.dead[i])
	}
	return out, nil
}

// TakeDead implements Log.
func (m *MemLog) TakeDead(_ context.Context, id string) (DeadLetter, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, d := range m.dead {
		if d.ID == id {
			m.dead = slices.Delete(m.dead, i, i+1)
			return d, nil
		}
	}
	return DeadLetter{}, ErrNotFound
}

// Advance implements Log.
func (m *MemLog) Advance(_ context.Context, name string, total int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.counters[name]
	if ok && total <= last {
		return 0, nil
	}
	m.counters[name] = total
	if !ok {
		return 0, nil
	}
	return total - last, nil
}
