// Package cryptodev is an ocf.Driver over /dev/crypto, in both of its
// Linux dialects:
//
//   - cryptodev-linux (the out-of-tree module most distributions ship):
//     sessions with CIOCGSESSION ('c',102), work with CIOCCRYPT (104),
//     session info with CIOCGSESSINFO (107, gives the kernel driver name and
//     whether it is hardware), COP_ENCRYPT=0.
//   - BSD/OCF (OCF-linux, the framework whose "safe" driver runs the
//     SafeNet 1141): CRIOGET ('c',100) clones the descriptor, then
//     CIOCGSESSION (101), CIOCCRYPT (103), COP_ENCRYPT=1. Later OCF-linux
//     releases added CIOCGSESSION2 (106, returns the crypto device id) and
//     CIOCFINDDEV (108, device id to name, e.g. "safe0"); the driver uses
//     them when present and works without them.
//
// ioctl numbers are derived from the struct layouts for the running
// GOARCH (see IoctlNumbers); the layouts are computed from a description of
// the target ABI so that tests can pin them for 386, arm and amd64 on any
// host.
//
// Batching: Session.Do issues one CIOCCRYPT per request. cryptodev-linux
// has CIOCASYNCCRYPT/CIOCASYNCFETCH (compiled in only with ENABLE_ASYNC,
// results collected with poll) and NetBSD has CIOCNCRYPTM; OCF-linux has
// neither (its COP_F_BATCH flag only defers dispatch inside the kernel while
// the ioctl still waits), so there is no multi-request call to use on the
// boards' kernels and none is implemented.
package cryptodev

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/internal/cabi"
	"github.com/ocfw/ocfw/ocf"
)

// Dialect is which /dev/crypto API the device speaks.
type Dialect int

const (
	Auto  Dialect = iota // detect (see Open)
	Linux                // cryptodev-linux
	OCF                  // BSD/OCF as OCF-linux implements it
)

func (d Dialect) String() string {
	switch d {
	case Auto:
		return "auto"
	case Linux:
		return "cryptodev-linux"
	case OCF:
		return "ocf"
	}
	return fmt.Sprintf("dialect(%d)", int(d))
}

// Errors callers can test for with errors.Is (besides the ocf errors).
var (
	// ErrDialect: the device answers neither dialect's probe, or not the
	// one asked for.
	ErrDialect = errors.New("cryptodev: not a /dev/crypto of the expected dialect")
	// ErrDevice: the device failed a request (the errno is wrapped too).
	ErrDevice = errors.New("cryptodev: device error")
)

// Dialect constants from the two headers.
const (
	linuxCOPEncrypt = 0
	linuxCOPDecrypt = 1
	ocfCOPEncrypt   = 1
	ocfCOPDecrypt   = 2

	siopFlagKernelDriverOnly = 1 // session_info_op.flags: a hardware driver

	ocfFlagHardware = 0x01000000 // crid flags for CIOCGSESSION2
	ocfFlagSoftware = 0x02000000

	ocfMaxData     = 64*1024 - 1 // OCF-linux CRYPTO_MAX_DATA_LEN: E2BIG above
	linuxMaxMACKey = 512         // cryptodev-linux CRYPTO_HMAC_MAX_KEY_LEN
	maxDigest      = 64          // AALG_MAX_RESULT_LEN
	eintrRetries   = 3
)

// hardwareNames mark kernel drivers as hardware when an older
// cryptodev-linux or kernel does not set SIOP_FLAG_KERNEL_DRIVER_ONLY:
// the engines of FACTS.md ("cbc-aes-geode", "cbc-aes-hifn0",
// "cbc(aes)-ixp4xx").
var hardwareNames = []string{"geode", "hifn", "ixp4xx"}

// Options tune Open.
type Options struct {
	Dialect Dialect
	// HardwareOnly offers only ciphers a hardware engine serves, as far
	// as the dialect tells: cryptodev-linux's session info, OCF's
	// CIOCGSESSION2 with the hardware flag. An OCF device without
	// CIOCGSESSION2 cannot tell and is taken as hardware.
	HardwareOnly bool
}

// Engine says which kernel driver serves one cipher.
type Engine struct {
	Cipher   string
	Driver   string // kernel driver ("cbc-aes-geode") or OCF device ("safe0"); "" when the dialect cannot tell
	Hardware bool
}

// Driver is /dev/crypto as an ocf.Driver. Sessions share its descriptor.
type Driver struct {
	dev     Device
	dialect Dialect
	nr      Ioctls
	opts    Options
	name    string
	hw      bool
	caps    ocf.Caps
	engines []Engine
	closed  atomic.Bool

	// OCF: whether CIOCGSESSION2/CIOCFINDDEV exist, and the device
	// names seen per crid (Open may run in several goroutines).
	session2 bool
	namesMu  sync.Mutex
	names    map[uint32]string
}

var _ ocf.Driver = (*Driver)(nil)

// Open opens /dev/crypto at path in the given dialect (Auto to detect) and
// probes which catalog ciphers it serves.
func Open(path string, dialect Dialect) (*Driver, error) {
	return OpenWith(path, Options{Dialect: dialect})
}

// OpenWith is Open with options.
func OpenWith(path string, opts Options) (*Driver, error) {
	dev, err := OpenDevice(path)
	if err != nil {
		return nil, fmt.Errorf("cryptodev: %w", err)
	}
	return New(dev, opts)
}

// New builds a Driver on an open device and takes ownership of it: dev is
// closed when New fails and when the Driver is closed.
//
// Detection is ordered so that no probe can do harm on the other dialect:
// first OCF's CRIOGET (0xc0046364: cryptodev-linux has no request with
// that number and answers EINVAL; on OCF it is the required first step),
// then cryptodev-linux's CIOCASYMFEAT (0x8004636a: reads one word; OCF has
// no request with that number). The two dialects share no request number on
// any supported Arch (a test checks this), so later requests cannot be
// mistaken either.
func New(dev Device, opts Options) (*Driver, error) {
	a, err := HostArch()
	if err != nil {
		dev.Close()
		return nil, err
	}
	dev, dialect, err := detect(dev, opts.Dialect, a)
	if err != nil {
		return nil, err
	}
	nr, err := IoctlNumbers(dialect, a)
	if err != nil {
		dev.Close()
		return nil, err
	}
	d := &Driver{dev: dev, dialect: dialect, nr: nr, opts: opts, names: map[uint32]string{}}
	d.name = "cryptodev:" + dialect.String() // until the probe names it
	if dialect == OCF {
		d.session2 = hasFindDev(dev, nr)
	}
	if err := d.probe(); err != nil {
		dev.Close()
		return nil, err
	}
	return d, nil
}

func detect(dev Device, want Dialect, a cabi.Arch) (Device, Dialect, error) {
	lin, _ := IoctlNumbers(Linux, a)
	bsd, _ := IoctlNumbers(OCF, a)
	var ocfErr, linErr error
	if want == Auto || want == OCF {
		var fd int32 = -1
		ocfErr = ioctlRetry(dev, bsd.CRIOGET, unsafe.Pointer(&fd))
		if ocfErr == nil {
			clone, err := dev.Adopt(int(fd))
			dev.Close()
			if err != nil {
				return nil, 0, fmt.Errorf("cryptodev: CRIOGET: %w", err)
			}
			return clone, OCF, nil
		}
		if want == OCF {
			dev.Close()
			return nil, 0, fmt.Errorf("%w: OCF CRIOGET (%#x): %w", ErrDialect, bsd.CRIOGET, ocfErr)
		}
	}
	if want == Auto || want == Linux {
		var feat uint32
		linErr = ioctlRetry(dev, lin.CIOCASYMFEAT, unsafe.Pointer(&feat))
		if linErr == nil {
			return dev, Linux, nil
		}
	}
	dev.Close()
	if want == Linux {
		return nil, 0, fmt.Errorf("%w: cryptodev-linux CIOCASYMFEAT (%#x): %w", ErrDialect, lin.CIOCASYMFEAT, linErr)
	}
	if want != Auto {
		return nil, 0, fmt.Errorf("%w: unknown dialect %v", ErrDialect, want)
	}
	return nil, 0, fmt.Errorf("%w: neither OCF CRIOGET (%v) nor cryptodev-linux CIOCASYMFEAT (%v) answered", ErrDialect, ocfErr, linErr)
}

// hasFindDev tells an OCF-linux with CIOCGSESSION2 and CIOCFINDDEV (they
// came together) from an older one: looking up a driver by name answers 0
// or ENOENT where the request exists, EINVAL where it does not. Trying
// CIOCGSESSION2 itself could not tell "no such request" from "no engine
// for this cipher".
func hasFindDev(dev Device, nr Ioctls) bool {
	op := hostCryptFindOp{crid: -1}
	copy(op.name[:], "cryptosoft")
	err := ioctlRetry(dev, nr.CIOCFINDDEV, unsafe.Pointer(&op))
	return err == nil || errors.Is(err, syscall.ENOENT)
}

// ioctlRetry repeats a request interrupted by a signal; only for requests
// that change nothing when they fail.
func ioctlRetry(dev Device, req uint32, arg unsafe.Pointer) error {
	var err error
	for i := 0; i < eintrRetries; i++ {
		if err = dev.Ioctl(req, arg); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
	return err
}

// probe opens and frees one session per catalog cipher to learn what the
// device serves and by which engine. Weak-key checks are avoided by a key
// whose bytes all differ.
func (d *Driver) probe() error {
	d.caps = ocf.Caps{Ciphers: map[string][]int{}}
	if d.dialect == OCF {
		d.caps.MaxRequest = ocfMaxData
	}
	var firstErr error
	for _, c := range catalog.Ciphers() {
		key := make([]byte, c.KeySize)
		for i := range key {
			key[i] = byte(0x5a ^ i*0x3b)
		}
		ses, eng, err := d.newSession(&c, key)
		if err != nil {
			if errors.Is(err, ocf.ErrClosed) {
				return err
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		d.freeSession(ses)
		if d.opts.HardwareOnly && !eng.Hardware {
			continue
		}
		d.caps.Ciphers[c.Name] = d.keySizes(&c)
		d.engines = append(d.engines, eng)
	}
	if len(d.engines) == 0 {
		if firstErr == nil {
			firstErr = fmt.Errorf("%w: no hardware engine", ocf.ErrUnsupported)
		}
		return fmt.Errorf("cryptodev: %v device serves no catalog cipher: %w", d.dialect, firstErr)
	}
	d.name, d.hw = nameOf(d.dialect, d.engines)
	return nil
}

// nameOf names the driver after the engines behind it: the hardware ones
// if any, else all, joined with "+"; the dialect when none has a name.
func nameOf(dialect Dialect, engines []Engine) (string, bool) {
	var hw, all []string
	seen := map[string]bool{}
	anyHW := false
	for _, e := range engines {
		anyHW = anyHW || e.Hardware
		if e.Driver == "" || seen[e.Driver] {
			continue
		}
		seen[e.Driver] = true
		all = append(all, e.Driver)
		if e.Hardware {
			hw = append(hw, e.Driver)
		}
	}
	names := hw
	if len(names) == 0 {
		names = all
	}
	if len(names) == 0 {
		return "cryptodev:" + dialect.String(), anyHW
	}
	return "cryptodev:" + strings.Join(names, "+"), anyHW
}

// keySizes is what Caps reports per cipher: the catalog size for ciphers;
// for HMAC any length on cryptodev-linux, exactly the natural size on OCF
// (OCF-linux refuses any other mackeylen); any for null (the key is
// ignored).
func (d *Driver) keySizes(c *ocf.Cipher) []int {
	switch c.Kind {
	case catalog.KindCipher:
		return []int{c.KeySize}
	case catalog.KindMAC:
		if d.dialect == OCF {
			return []int{c.KeySize}
		}
	}
	return nil
}

// Name is "cryptodev:" and the engine names (see Engines).
func (d *Driver) Name() string { return d.name }

// Hardware is true when any offered cipher runs on a hardware engine, or
// when the dialect cannot tell.
func (d *Driver) Hardware() bool { return d.hw }

// Caps lists the catalog ciphers the device served when probed.
func (d *Driver) Caps() ocf.Caps {
	c := ocf.Caps{Ciphers: make(map[string][]int, len(d.caps.Ciphers)), MaxRequest: d.caps.MaxRequest}
	for k, v := range d.caps.Ciphers {
		c.Ciphers[k] = append([]int(nil), v...)
	}
	return c
}

// Dialect is the dialect the device speaks.
func (d *Driver) Dialect() Dialect { return d.dialect }

// Engines lists, per offered cipher, the engine the probe session ran on.
func (d *Driver) Engines() []Engine { return append([]Engine(nil), d.engines...) }

// Close closes the descriptor; the kernel frees sessions left open.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	return d.dev.Close()
}

// Open starts a session for cipher c with key.
func (d *Driver) Open(c *ocf.Cipher, key []byte) (ocf.Session, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil cipher", ocf.ErrUnknownCipher)
	}
	if d.closed.Load() {
		return nil, fmt.Errorf("%s: %w", d.name, ocf.ErrClosed)
	}
	if _, ok := d.caps.Ciphers[c.Name]; !ok || c.CryptodevAlg == 0 {
		return nil, fmt.Errorf("%w: %s does not offer %s", ocf.ErrUnsupported, d.name, c.Name)
	}
	if err := ocf.CheckKey(c, key); err != nil {
		return nil, err
	}
	if c.Kind == catalog.KindMAC {
		switch {
		case d.dialect == OCF && len(key) != c.KeySize:
			return nil, fmt.Errorf("%w: OCF takes %s keys of exactly %d bytes, got %d", ocf.ErrKeySize, c.Name, c.KeySize, len(key))
		case len(key) > linuxMaxMACKey:
			return nil, fmt.Errorf("%w: %s key of %d bytes, /dev/crypto takes at most %d", ocf.ErrKeySize, c.Name, len(key), linuxMaxMACKey)
		}
	}
	cc := *c
	ses, eng, err := d.newSession(&cc, key)
	if err != nil {
		return nil, err
	}
	s := &session{d: d, c: &cc, ses: ses, maxLen: d.caps.MaxRequest}
	s.name = "cryptodev:" + d.dialect.String()
	if eng.Driver != "" {
		s.name = "cryptodev:" + eng.Driver
	}
	s.enc, s.dec = linuxCOPEncrypt, linuxCOPDecrypt
	if d.dialect == OCF {
		s.enc, s.dec = ocfCOPEncrypt, ocfCOPDecrypt
	}
	return s, nil
}

// newSession creates a kernel session for c and reports its engine.
func (d *Driver) newSession(c *ocf.Cipher, key []byte) (uint32, Engine, error) {
	eng := Engine{Cipher: c.Name, Hardware: true}
	var cipherAlg, macAlg uint32
	var ckey, mkey []byte
	switch c.Kind {
	case catalog.KindMAC:
		macAlg, mkey = c.CryptodevAlg, key
	case catalog.KindCipher:
		cipherAlg, ckey = c.CryptodevAlg, key
	case catalog.KindNull:
		cipherAlg = c.CryptodevAlg // key ignored: the null cipher takes none
	default:
		return 0, eng, fmt.Errorf("%w: kind %q", ocf.ErrUnsupported, c.Kind)
	}
	if d.closed.Load() {
		return 0, eng, fmt.Errorf("%s: %w", d.name, ocf.ErrClosed)
	}
	var ses uint32
	var err error
	if d.session2 {
		crid := uint32(ocfFlagHardware | ocfFlagSoftware)
		if d.opts.HardwareOnly {
			crid = ocfFlagHardware
		}
		op := hostSession2Op{cipher: cipherAlg, mac: macAlg,
			keylen: uint32(len(ckey)), key: ptr(ckey),
			mackeylen: uint32(len(mkey)), mackey: ptr(mkey), crid: crid}
		err = ioctlRetry(d.dev, d.nr.CIOCGSESSION2, unsafe.Pointer(&op))
		if err == nil {
			ses = op.ses
			eng.Driver = d.deviceName(op.crid)
			eng.Hardware = eng.Driver == "" || !strings.HasPrefix(eng.Driver, "cryptosoft")
		}
	} else {
		op := hostSessionOp{cipher: cipherAlg, mac: macAlg,
			keylen: uint32(len(ckey)), key: ptr(ckey),
			mackeylen: uint32(len(mkey)), mackey: ptr(mkey)}
		err = ioctlRetry(d.dev, d.nr.CIOCGSESSION, unsafe.Pointer(&op))
		ses = op.ses
	}
	runtime.KeepAlive(key)
	if err != nil {
		return 0, eng, d.sessionError(c, err)
	}
	if d.dialect == Linux {
		info := hostSessionInfoOp{ses: ses}
		// Session info came with cryptodev-linux 0.9; without it the
		// engine stays unnamed and is taken as hardware.
		if ioctlRetry(d.dev, d.nr.CIOCGSESSINFO, unsafe.Pointer(&info)) == nil {
			if c.Kind == catalog.KindMAC {
				eng.Driver = cString(info.hashDriver[:])
			} else {
				eng.Driver = cString(info.cipherDriver[:])
			}
			eng.Hardware = info.flags&siopFlagKernelDriverOnly != 0 || knownHardware(eng.Driver)
		}
	}
	return ses, eng, nil
}

func knownHardware(name string) bool {
	for _, h := range hardwareNames {
		if strings.Contains(name, h) {
			return true
		}
	}
	return false
}

// deviceName asks OCF for the name of crypto device crid, once per crid.
func (d *Driver) deviceName(crid uint32) string {
	d.namesMu.Lock()
	defer d.namesMu.Unlock()
	if n, ok := d.names[crid]; ok {
		return n
	}
	op := hostCryptFindOp{crid: int32(crid)}
	name := ""
	if ioctlRetry(d.dev, d.nr.CIOCFINDDEV, unsafe.Pointer(&op)) == nil {
		name = cString(op.name[:])
	}
	d.names[crid] = name
	return name
}

func (d *Driver) freeSession(ses uint32) error {
	err := ioctlRetry(d.dev, d.nr.CIOCFSESSION, unsafe.Pointer(&ses))
	if err != nil {
		return d.deviceError("CIOCFSESSION", err)
	}
	return nil
}

func (d *Driver) sessionError(c *ocf.Cipher, err error) error {
	if errors.Is(err, syscall.EBADF) {
		return fmt.Errorf("%s: session for %s: %w: %w", d.name, c.Name, ocf.ErrClosed, err)
	}
	// The key was checked against the catalog already, so a refusal
	// means the device lacks the algorithm (or rejects this key, e.g. a
	// DES weak key where the kernel checks for them).
	return fmt.Errorf("%w: %s refused a %s session: %w", ocf.ErrUnsupported, d.name, c.Name, err)
}

func (d *Driver) deviceError(what string, err error) error {
	kind := ErrDevice
	switch {
	case errors.Is(err, syscall.E2BIG):
		kind = ocf.ErrTooLarge
	case errors.Is(err, syscall.ETIMEDOUT):
		kind = ocf.ErrTimeout
	case errors.Is(err, syscall.EBADF):
		kind = ocf.ErrClosed
	}
	return fmt.Errorf("%s: %s: %w: %w", d.name, what, kind, err)
}

// session is one kernel session. Its crypt_op and scratch buffers are
// reused, so a request allocates nothing.
type session struct {
	d        *Driver
	c        *ocf.Cipher
	ses      uint32
	name     string
	closed   bool
	enc, dec uint16
	maxLen   int // 0: no limit but crypt_op.len's
	op       hostCryptOp
	// zero is a zero IV block for OCF's null cipher (OCF reads a
	// block-sized IV and, given none, takes it from the data) and a
	// non-nil source for empty MAC input; mac receives the digest so
	// the kernel never writes into caller memory beyond DigestSize.
	zero [16]byte
	mac  [maxDigest]byte
}

func (s *session) Cipher() *ocf.Cipher { return s.c }

// Driver is "cryptodev:" and the kernel driver or OCF device serving
// this session.
func (s *session) Driver() string { return s.name }

func (s *session) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.d.closed.Load() {
		return nil // the kernel dropped the session with the descriptor
	}
	return s.d.freeSession(s.ses)
}

func (s *session) Do(reqs []ocf.Request) error {
	if s.closed || s.d.closed.Load() {
		err := fmt.Errorf("%s: %w", s.name, ocf.ErrClosed)
		for i := range reqs {
			reqs[i].Err = err
		}
		return err
	}
	var first error
	for i := range reqs {
		r := &reqs[i]
		r.Err = s.do(r)
		if r.Err != nil && first == nil {
			first = r.Err
		}
	}
	return first
}

func (s *session) do(r *ocf.Request) error {
	if err := ocf.CheckRequest(s.c, r); err != nil {
		return err
	}
	n := len(r.Src)
	if s.maxLen > 0 && n > s.maxLen {
		return fmt.Errorf("%w: %d bytes, %s takes at most %d", ocf.ErrTooLarge, n, s.name, s.maxLen)
	}
	if uint64(n) > math.MaxUint32 { // crypt_op.len is 32 bits
		return fmt.Errorf("%w: %d bytes, crypt_op.len is 32 bits", ocf.ErrTooLarge, n)
	}
	op := &s.op
	*op = hostCryptOp{ses: s.ses, len: uint32(n)}
	retry := true // a failed request left Src intact
	if s.c.Kind == catalog.KindMAC {
		op.op = s.enc
		op.src = ptr(r.Src)
		if op.src == nil {
			op.src = &s.zero[0]
		}
		op.mac = &s.mac[0]
	} else {
		if n == 0 {
			return nil // nothing to transform
		}
		out := r.Out()
		if inexactOverlap(out, r.Src) {
			return fmt.Errorf("%w: Dst overlaps Src without being the same buffer", ocf.ErrLength)
		}
		op.op = s.enc
		if r.Op == ocf.Decrypt {
			op.op = s.dec
		}
		op.src, op.dst = &r.Src[0], &out[0]
		op.iv = ptr(r.IV)
		if op.iv == nil && s.d.dialect == OCF {
			op.iv = &s.zero[0]
		}
		// In place, an interrupted request may have changed part of
		// the data (zero-copy); redoing it would transform it twice.
		retry = op.src != op.dst
	}
	var err error
	for i := 0; i < eintrRetries; i++ {
		err = s.d.dev.Ioctl(s.d.nr.CIOCCRYPT, unsafe.Pointer(op))
		if !retry || !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	*op = hostCryptOp{} // keep no reference to caller buffers
	runtime.KeepAlive(r.Src)
	runtime.KeepAlive(r.Dst)
	runtime.KeepAlive(r.IV)
	if err != nil {
		return s.d.deviceError(fmt.Sprintf("CIOCCRYPT %s %s of %d bytes", s.c.Name, r.Op, n), err)
	}
	if s.c.Kind == catalog.KindMAC {
		copy(r.Dst[:s.c.DigestSize], s.mac[:])
	}
	return nil
}

// inexactOverlap reports whether x and y share memory without starting at
// the same byte (in place is fine; a shifted overlap is not).
func inexactOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 || &x[0] == &y[0] {
		return false
	}
	xs, ys := uintptr(unsafe.Pointer(&x[0])), uintptr(unsafe.Pointer(&y[0]))
	return xs < ys+uintptr(len(y)) && ys < xs+uintptr(len(x))
}

// WriteEngines writes which kernel driver answers each cipher through
// the device at path, one line each, as `ocf engines` shows them: the
// kernel's choice when the sessions were opened (cryptodev-linux
// follows the crypto API's priorities, so `ocf engines prefer` and
// `demote` move it too).
func WriteEngines(w io.Writer, path string, d *Driver) error {
	if _, err := fmt.Fprintf(w, "through %s (%s):\n", path, d.Dialect()); err != nil {
		return err
	}
	for _, e := range d.Engines() {
		kind := "software"
		if e.Hardware {
			kind = "hardware"
		}
		name := e.Driver
		if name == "" {
			name = "(not named by the device)"
		}
		if _, err := fmt.Fprintf(w, "  %-14s %s  %s\n", e.Cipher, name, kind); err != nil {
			return err
		}
	}
	return nil
}
