// Package afalg is an ocf.Driver over the Linux kernel crypto API, reached
// through AF_ALG sockets: skciphers (cbc(aes), cbc(des), cbc(des3_ede),
// ecb(cipher_null)) and hashes (hmac(md5), hmac(sha1), hmac(sha256)).
//
// A session binds either the catalog's generic name, which the kernel
// resolves to its highest-priority implementation, or a driver name such as
// "cbc-aes-hifn0", which pins one engine so that it can be tested or used
// even when another engine outranks it.
//
// One request is one sendmsg (control messages ALG_SET_OP and ALG_SET_IV
// plus the data) and one read. With a depth above 1 (by default for
// asynchronous implementations such as the Hifn's) a skcipher session
// accepts that many operation sockets and puts up to that many requests of
// a batch in flight with Linux AIO; see aio.go for why reads, not writes,
// must be asynchronous.
package afalg

import (
	"errors"
	"fmt"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
)

// MaxRequest is the largest request a session takes. The kernel queues a
// request's data in the socket's send buffer (about 160-210 KiB by
// default) and blocks the writer when it is full, so requests stay well
// under it.
const MaxRequest = 64 << 10

// MaxDepth bounds Options.Depth: each level is one socket and one AIO slot.
const MaxDepth = 64

// AsyncDepth is the depth Options.Depth 0 gives asynchronous
// implementations.
const AsyncDepth = 8

// Options configure a Driver. The zero value binds generic names, one
// request at a time.
type Options struct {
	// Driver pins every session to one kernel implementation by its
	// driver name (e.g. "cbc-aes-geode", "cbc-aes-hifn0"). The Driver then
	// offers only the catalog ciphers that implementation serves.
	Driver string
	// Names overrides the kernel name per catalog cipher, e.g.
	// {"aes-128-cbc": "cbc-aes-hifn0"}; generic or driver names.
	Names map[string]string
	// Depth is how many skcipher requests a session keeps in flight
	// when Do gets a batch (one operation socket each, submitted with one
	// io_submit). 1 means one at a time. 0 chooses: AsyncDepth for
	// asynchronous implementations (Hifn), 1 for synchronous ones (Geode,
	// generic code), which finish inside the read anyway and for which
	// AIO only adds kernel work. Hashes are always one at a time: the
	// kernel computes them inside sendmsg.
	Depth int
	// ProcCrypto is the /proc/crypto to read (for tests); empty means
	// the real one.
	ProcCrypto string
}

// hardwareModules are the modules of the catalog's hardware engines
// (the stand-ins for cards in QEMU among them) and VIA PadLock's, whose
// implementations offload the CPU or stand in for an engine that does.
var hardwareModules = func() map[string]bool {
	m := map[string]bool{"padlock_aes": true, "padlock_sha": true}
	for _, e := range catalog.Engines() {
		if e.Hardware && e.Module != "" {
			m[e.Module] = true
		}
	}
	return m
}()

// Driver is the kernel crypto API as an ocf.Driver.
type Driver struct {
	opts  Options
	entry *Entry // the pinned implementation when opts.Driver is set
	caps  ocf.Caps
}

var _ ocf.Driver = (*Driver)(nil)

// Available reports whether this kernel offers AF_ALG sockets; the error
// says what is missing.
func Available() error {
	fd, err := unix.Socket(unix.AF_ALG, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return kernelErr("socket", err, "needs CONFIG_CRYPTO_USER_API (module af_alg)", ocf.ErrUnsupported)
	}
	unix.Close(fd)
	return nil
}

// New checks that AF_ALG works and, when opts.Driver pins an
// implementation, binds it once (which makes the kernel load its module)
// and reads /proc/crypto to learn what it serves.
func New(opts Options) (*Driver, error) {
	if opts.Depth < 0 || opts.Depth > MaxDepth {
		return nil, fmt.Errorf("afalg: depth %d outside 0..%d", opts.Depth, MaxDepth)
	}
	for name := range opts.Names {
		if _, err := ocf.LookupCipher(name); err != nil {
			return nil, fmt.Errorf("afalg: Names: %w", err)
		}
	}
	if err := Available(); err != nil {
		return nil, err
	}
	d := &Driver{opts: opts, caps: ocf.Caps{Ciphers: map[string][]int{}, MaxRequest: MaxRequest}}
	if opts.Driver == "" {
		for _, c := range catalog.Ciphers() {
			if c.KernelType == "skcipher" || c.KernelType == "hash" {
				d.caps.Ciphers[c.Name] = keySizes(&c, nil)
			}
		}
		return d, nil
	}
	e, err := d.probe(opts.Driver)
	if err != nil {
		return nil, err
	}
	d.entry = &e
	d.caps.Ciphers = capsFor(&e)
	if len(d.caps.Ciphers) == 0 {
		return nil, fmt.Errorf("%w: afalg: %s implements %s (%s), which no catalog cipher uses", ocf.ErrUnsupported, e.Driver, e.Name, e.Type)
	}
	return d, nil
}

// probe binds name as each socket type until one works and returns its
// /proc/crypto entry.
func (d *Driver) probe(name string) (Entry, error) {
	var firstErr error
	for _, sock := range []string{"skcipher", "hash"} {
		fd, err := bind(sock, name, d.opts.ProcCrypto)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		unix.Close(fd)
		entries, err := ReadProcCrypto(d.opts.ProcCrypto)
		if err != nil {
			return Entry{}, fmt.Errorf("afalg: %s bound, but %w", name, err)
		}
		e, ok := Resolve(entries, sock, name)
		if !ok {
			return Entry{}, fmt.Errorf("afalg: %s bound as %s but /proc/crypto does not list it", name, sock)
		}
		return e, nil
	}
	return Entry{}, firstErr
}

// capsFor lists the catalog ciphers an implementation serves, with the
// key sizes it accepts.
func capsFor(e *Entry) map[string][]int {
	m := map[string][]int{}
	for _, c := range catalog.Ciphers() {
		if c.Kernel == e.Name && typeMatches(c.KernelType, e.Type) {
			if ks := keySizes(&c, e); ks != nil {
				m[c.Name] = ks
			}
		}
	}
	return m
}

// keySizes lists the catalog key size of c if the implementation accepts
// it (nil e: no limits known). MACs take any key length: empty list.
func keySizes(c *ocf.Cipher, e *Entry) []int {
	if c.Kind != catalog.KindCipher {
		return []int{}
	}
	if e != nil && e.MaxKeySize > 0 && (c.KeySize < e.MinKeySize || c.KeySize > e.MaxKeySize) {
		return nil
	}
	return []int{c.KeySize}
}

// Name is the pinned driver name, or "afalg" when the kernel chooses.
func (d *Driver) Name() string {
	if d.entry != nil {
		return d.entry.Driver
	}
	return "afalg"
}

// Hardware is true when the driver is pinned to an engine's module. With
// generic names the kernel chooses per cipher, so the driver as a whole
// does not claim hardware.
func (d *Driver) Hardware() bool { return d.entry != nil && hardwareModules[d.entry.Module] }

// Caps lists the catalog ciphers and key sizes this driver can open.
func (d *Driver) Caps() ocf.Caps {
	c := ocf.Caps{Ciphers: make(map[string][]int, len(d.caps.Ciphers)), MaxRequest: d.caps.MaxRequest}
	for k, v := range d.caps.Ciphers {
		c.Ciphers[k] = append([]int{}, v...)
	}
	return c
}

// Entry is the /proc/crypto entry of the pinned implementation, if any.
func (d *Driver) Entry() (Entry, bool) {
	if d.entry == nil {
		return Entry{}, false
	}
	return *d.entry, true
}

// kernelName is the name a session for c binds.
func (d *Driver) kernelName(c *ocf.Cipher) string {
	if n, ok := d.opts.Names[c.Name]; ok {
		return n
	}
	if d.entry != nil {
		return d.entry.Driver
	}
	return c.Kernel
}

// Open binds a transform for c, sets key, and accepts the operation
// socket(s). Sizes are checked before the kernel is touched.
func (d *Driver) Open(c *ocf.Cipher, key []byte) (ocf.Session, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil cipher", ocf.ErrUnknownCipher)
	}
	if err := ocf.CheckKey(c, key); err != nil {
		return nil, err
	}
	if !d.caps.Supports(c.Name, len(key)) {
		return nil, fmt.Errorf("%w: %s with a %d-byte key on %s (offers %v)", ocf.ErrUnsupported, c.Name, len(key), d.Name(), sortedNames(d.caps.Ciphers))
	}
	sock, name := c.KernelType, d.kernelName(c)
	tfm, err := bind(sock, name, d.opts.ProcCrypto)
	if err != nil {
		return nil, err
	}
	if len(key) > 0 || c.Kind == catalog.KindMAC {
		if err := unix.SetsockoptString(tfm, unix.SOL_ALG, unix.ALG_SET_KEY, string(key)); err != nil {
			unix.Close(tfm)
			return nil, kernelErr(fmt.Sprintf("set %d-byte key on %s %s", len(key), sock, name), err, "", ocf.ErrKeySize)
		}
	}
	served, async := name, false
	if entries, err := ReadProcCrypto(d.opts.ProcCrypto); err == nil {
		if e, ok := Resolve(entries, sock, name); ok {
			served, async = e.Driver, e.Async
		}
	}
	label := sock + " " + served
	switch sock {
	case "skcipher":
		depth := d.opts.Depth
		if depth == 0 && async {
			depth = AsyncDepth
		}
		s, err := newSkSession(c, tfm, served, label, depth)
		if err != nil {
			unix.Close(tfm)
			return nil, err
		}
		return s, nil
	case "hash":
		s, err := newHashSession(c, tfm, served, label)
		if err != nil {
			unix.Close(tfm)
			return nil, err
		}
		return s, nil
	}
	unix.Close(tfm)
	return nil, fmt.Errorf("%w: %s has kernel type %q", ocf.ErrUnsupported, c.Name, sock)
}

func sortedNames(m map[string][]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Bind opens an AF_ALG socket bound to name as a transform of type sock
// ("skcipher", "hash", or "aead" with algif_aead): the kernel looks name
// up as it would for any user of the crypto API — a generic name gets
// its highest-priority implementation, a template instance is built if
// none exists — and holds that implementation until fd is closed.
// Errors explain what is missing, as Open's do.
func Bind(sock, name string) (fd int, err error) { return bind(sock, name, "") }

// bind opens an AF_ALG socket bound to a transform of type sock.
func bind(sock, name, procPath string) (int, error) {
	fd, err := unix.Socket(unix.AF_ALG, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, kernelErr("socket", err, "needs CONFIG_CRYPTO_USER_API (module af_alg)", ocf.ErrUnsupported)
	}
	if err := unix.Bind(fd, &unix.SockaddrALG{Type: sock, Name: name}); err != nil {
		unix.Close(fd)
		entries, _ := ReadProcCrypto(procPath)
		return -1, bindErr(sock, name, err, entries)
	}
	return fd, nil
}

// accept makes an operation socket from a bound (and keyed) transform
// socket. unix.Accept cannot be used: it fails on the AF_ALG peer address.
func accept(tfm int) (int, error) {
	for {
		r, _, e := unix.Syscall6(unix.SYS_ACCEPT4, uintptr(tfm), 0, 0, unix.SOCK_CLOEXEC, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(r), nil
	}
}

// readFull reads len(b) bytes of result. The kernel normally returns them
// in one read; a short read continues where the kernel stopped (the cipher
// state, including the CBC IV, stays in the socket).
func readFull(fd int, b []byte) error {
	for got := 0; got < len(b); {
		n, err := unix.Read(fd, b[got:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: kernel returned %d of %d bytes", ocf.ErrLength, got, len(b))
		}
		got += n
	}
	return nil
}

var errBroken = errors.New("afalg: session unusable after a failed socket reset")
