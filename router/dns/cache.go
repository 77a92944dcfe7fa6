package dns

import (
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// cacheKey is what changes an answer: the name (case-insensitively),
// type and class, and the DO and CD bits (DNSSEC records, and answers a
// validating upstream would refuse). The client's EDNS size does not:
// every reply is cut to the asker's size (render).
type cacheKey struct {
	name   string
	typ    dnsmessage.Type
	class  dnsmessage.Class
	do, cd bool
}

type entry struct {
	seq     uint64 // its place in Forwarder.order
	msg     []byte // the upstream's answer, packed
	stored  time.Time
	expires time.Time
}

// placed is a key's place in the eviction order: a key stored again
// (after expiring) gets a new one, and its old place evicts nothing.
type placed struct {
	key cacheKey
	seq uint64
}

// cached returns the answer for k and how long it has been kept (its
// TTLs are counted down by that much).
func (f *Forwarder) cached(k cacheKey) (*dnsmessage.Message, time.Duration, bool) {
	f.mu.Lock()
	e := f.cache[k]
	now := f.cfg.Now()
	if e != nil && !now.Before(e.expires) {
		f.drop(k)
		e = nil
	}
	f.mu.Unlock()
	if e == nil {
		return nil, 0, false
	}
	var m dnsmessage.Message
	if err := m.Unpack(e.msg); err != nil {
		return nil, 0, false
	}
	return &m, now.Sub(e.stored), true
}

// drop removes k's entry; f.mu is held.
func (f *Forwarder) drop(k cacheKey) {
	if e, ok := f.cache[k]; ok {
		f.cacheBytes -= len(e.msg)
		delete(f.cache, k)
	}
}

// store keeps an answer for its smallest TTL (capped); answers that are
// errors (other than NXDOMAIN), truncated, or carry no TTL are not kept.
func (f *Forwarder) store(k cacheKey, m *dnsmessage.Message) {
	if (m.RCode != dnsmessage.RCodeSuccess && m.RCode != dnsmessage.RCodeNameError) || m.Truncated {
		return
	}
	ttl := f.cfg.MaxTTL
	found := false
	// NXDOMAIN and empty answers carry their TTL in the SOA.
	for _, rs := range [][]dnsmessage.Resource{m.Answers, m.Authorities} {
		for _, r := range rs {
			found = true
			ttl = min(ttl, time.Duration(r.Header.TTL)*time.Second)
		}
	}
	if !found || ttl <= 0 {
		return
	}
	b, err := m.Pack()
	if err != nil || len(b) > f.cfg.CacheBytes/8 {
		return // one answer may not take more than an eighth of the cache
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.Now()
	f.drop(k)
	f.seq++
	f.order = append(f.order, placed{k, f.seq})
	f.cache[k] = &entry{seq: f.seq, msg: b, stored: now, expires: now.Add(ttl)}
	f.cacheBytes += len(b)
	for (len(f.cache) > f.cfg.CacheSize || f.cacheBytes > f.cfg.CacheBytes) && len(f.order) > 0 {
		old := f.order[0]
		f.order = f.order[1:]
		if e := f.cache[old.key]; e != nil && e.seq == old.seq {
			f.drop(old.key)
		}
	}
	if len(f.order) > 2*f.cfg.CacheSize {
		// Places of expired or replaced entries pile up: compact.
		var keep []placed
		for _, o := range f.order {
			if e := f.cache[o.key]; e != nil && e.seq == o.seq {
				keep = append(keep, o)
			}
		}
		f.order = keep
	}
}
