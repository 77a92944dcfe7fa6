// Package kcrypto reads and changes which implementation the Linux kernel
// crypto API hands to a new user of a generic name such as cbc(aes): the
// engine IPsec, dm-crypt and AF_ALG users get. The kernel picks by
// priority, which each driver sets when it registers; the crypto user API
// (NETLINK_CRYPTO, module crypto_user, CAP_NET_ADMIN) changes a priority
// by exact driver name. The firmware uses it to keep the kernel off
// hardware engines until its self-test proves them (DemoteHardware), and
// then to put the engines that passed in the order its policy chose
// (Promote); `ocf engines` does the same by hand.
//
// How the kernel chooses (crypto/api.c __crypto_alg_lookup): it walks its
// list of registered algorithms — /proc/crypto shows that list in order,
// newest registration first — skipping dead and untested ones; an exact
// driver-name match wins at once, otherwise the highest priority among
// those whose generic name matches, the first listed on a tie (strictly
// greater replaces), so on equal priority the most recently registered
// wins. Only registered algorithms take part: when some cbc(aes) is
// registered, the kernel returns it rather than building a cbc template
// instance over a better aes, however good. Hence two rules here: after
// a change, the instances built on the losers are dropped (Flush) so that
// templates (cbc, authenc for IPsec) are rebuilt on the new choice; and
// demoting a hardware cbc(aes) needs a software cbc(aes) registered, which
// binding the software's driver name, e.g. cbc(aes-generic), builds.
package kcrypto

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/ocf/afalg"
)

// Alg is one algorithm the kernel has registered.
type Alg struct {
	Name     string `json:"name"`   // generic name, e.g. "cbc(aes)"
	Driver   string `json:"driver"` // unique driver name, e.g. "cbc-aes-geode"
	Module   string `json:"module"` // "kernel" when built in
	Priority int    `json:"priority"`
	Type     string `json:"type"` // skcipher, cipher, shash, ahash, aead, ...
	// SelfTest is "passed" or "unknown" (the kernel's own test; "passed"
	// is also shown when no test vector exists).
	SelfTest string `json:"selftest"`
	Async    bool   `json:"async"`
	Internal bool   `json:"internal,omitempty"` // never handed to users outside the kernel
	Refcnt   int    `json:"refcnt"`
	Flags    uint32 `json:"flags,omitempty"` // crypto_alg flags; set by Get only
}

// List reads the kernel's registered algorithms from /proc/crypto
// (procPath "" means the real one), in the kernel's list order.
func List(procPath string) ([]Alg, error) {
	entries, err := afalg.ReadProcCrypto(procPath)
	if err != nil {
		return nil, fmt.Errorf("kcrypto: %w", err)
	}
	out := make([]Alg, len(entries))
	for i, e := range entries {
		out[i] = fromEntry(e)
	}
	return out, nil
}

func fromEntry(e afalg.Entry) Alg {
	return Alg{Name: e.Name, Driver: e.Driver, Module: e.Module, Priority: e.Priority, Type: e.Type,
		SelfTest: e.SelfTest, Async: e.Async, Internal: e.Internal, Refcnt: e.Refcnt}
}

// Find returns the algorithm registered under the exact driver name.
func Find(algs []Alg, driver string) (Alg, bool) {
	for _, a := range algs {
		if a.Driver == driver {
			return a, true
		}
	}
	return Alg{}, false
}

// Resolution is which implementation the kernel gave a new user of a name.
type Resolution struct {
	Name     string `json:"name"`
	Type     string `json:"type"` // AF_ALG socket type used
	Driver   string `json:"driver"`
	Priority int    `json:"priority"`
	Module   string `json:"module"`
	// How says what showed it: "refcount" when the implementation's use
	// count in /proc/crypto rose by one with a second bound socket (the
	// kernel's own record of which implementation the socket holds);
	// "priority" when the counts were ambiguous and the kernel's lookup
	// rule (highest priority listed after the bind) decided.
	How string `json:"how"`
}

// Resolve binds AF_ALG sockets of type typ ("skcipher", "hash") to name,
// as a new user of the crypto API would — which makes the kernel build a
// template instance such as cbc(aes-generic) if it has to — and reports
// which registered implementation serves it. AF_ALG has no call that
// names the implementation behind a socket; what the kernel does show is
// each implementation's use count (a bound socket holds one reference),
// so Resolve reads /proc/crypto with one socket bound and again with two:
// the implementation of name whose count rose is the one served. A
// hardware driver's fallback (geode's cbc(aes-generic)) rises too but
// ranks below what was served, so the highest-priority riser wins.
func Resolve(name, typ string) (Resolution, error) {
	return resolve(name, typ, "")
}

func resolve(name, typ, procPath string) (Resolution, error) {
	fd1, err := afalg.Bind(typ, name)
	if err != nil {
		return Resolution{}, err
	}
	defer unix.Close(fd1)
	one, err := afalg.ReadProcCrypto(procPath)
	if err != nil {
		return Resolution{}, fmt.Errorf("kcrypto: %w", err)
	}
	fd2, err := afalg.Bind(typ, name)
	if err != nil {
		return Resolution{}, err
	}
	two, err := afalg.ReadProcCrypto(procPath)
	unix.Close(fd2)
	if err != nil {
		return Resolution{}, fmt.Errorf("kcrypto: %w", err)
	}
	return served(name, typ, one, two)
}

// served picks the implementation of name a bound socket holds from
// /proc/crypto read with one and with two sockets bound.
func served(name, typ string, one, two []afalg.Entry) (Resolution, error) {
	before := map[string]int{}
	for _, e := range afalg.Implementations(one, typ, name) {
		before[e.Driver] = e.Refcnt
	}
	var best *afalg.Entry
	impls := afalg.Implementations(two, typ, name)
	for i := range impls {
		e := &impls[i]
		if n, ok := before[e.Driver]; ok && e.Refcnt > n && (best == nil || e.Priority > best.Priority) {
			best = e
		}
	}
	how := "refcount"
	if best == nil {
		e, ok := afalg.Resolve(two, typ, name)
		if !ok {
			return Resolution{}, fmt.Errorf("kcrypto: %s bound as %s, but /proc/crypto lists no tested implementation of it", name, typ)
		}
		best, how = &e, "priority"
	}
	return Resolution{Name: name, Type: typ, Driver: best.Driver, Priority: best.Priority, Module: best.Module, How: how}, nil
}

// inner is the argument of a one-argument template name: "aes" for
// "cbc(aes)", "" for a name that is not of that form.
func inner(name string) (tmpl, arg string) {
	i := strings.IndexByte(name, '(')
	if i <= 0 || !strings.HasSuffix(name, ")") {
		return "", ""
	}
	arg = name[i+1 : len(name)-1]
	if strings.ContainsAny(arg, ",") {
		return "", ""
	}
	return name[:i], arg
}
