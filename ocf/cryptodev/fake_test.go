package cryptodev

import (
	"bytes"
	"crypto/cipher"
	"fmt"
	"hash"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ocfw/ocfw/internal/cabi"
	"github.com/ocfw/ocfw/ocf/ocftest"
)

// fakeState is a /dev/crypto in one dialect that checks every struct it
// receives against the pure layout and the dialect's rules, and answers
// with Go's crypto.
type fakeState struct {
	t       *testing.T
	dialect Dialect // 0: answers no request at all
	nr      Ioctls
	arch    cabi.Arch

	session2 bool              // OCF: CIOCGSESSION2 and CIOCFINDDEV exist
	noInfo   bool              // cryptodev-linux: no CIOCGSESSINFO (before 0.9)
	refuse   map[uint32]bool   // algorithm ids the device has no engine for
	drivers  map[uint32]string // cryptodev-linux: kernel driver per alg id
	hw       map[uint32]bool   // hardware per alg id (SIOP flag / safe0 vs cryptosoft0)

	cryptErrs []error // returned by the next CIOCCRYPTs, in order

	calls    []uint32 // every request, in order
	crypts   []hostCryptOp
	freed    []uint32
	sessions map[uint32]*fakeSession
	nextSes  uint32
	closedFD map[int]bool
}

type fakeSession struct {
	alg, mac uint32
	key      []byte
}

type fakeFD struct {
	st *fakeState
	fd int
}

const fakeCloneFD = 42

func newFake(t *testing.T, d Dialect) *fakeState {
	a, err := HostArch()
	if err != nil {
		t.Skip(err)
	}
	st := &fakeState{t: t, dialect: d, arch: a, sessions: map[uint32]*fakeSession{},
		nextSes: 0x1000, closedFD: map[int]bool{}, refuse: map[uint32]bool{},
		drivers: map[uint32]string{}, hw: map[uint32]bool{}}
	if d != Auto {
		st.nr, _ = IoctlNumbers(d, a)
	}
	return st
}

func (st *fakeState) device() Device { return &fakeFD{st: st, fd: 3} }

func (f *fakeFD) Adopt(fd int) (Device, error) {
	if fd != fakeCloneFD {
		return nil, fmt.Errorf("fake: adopt unknown fd %d", fd)
	}
	return &fakeFD{st: f.st, fd: fd}, nil
}

func (f *fakeFD) Close() error {
	if f.st.closedFD[f.fd] {
		f.st.t.Errorf("fake: fd %d closed twice", f.fd)
	}
	f.st.closedFD[f.fd] = true
	return nil
}

func (f *fakeFD) Ioctl(req uint32, arg unsafe.Pointer) error {
	st := f.st
	st.calls = append(st.calls, req)
	if st.closedFD[f.fd] {
		st.t.Errorf("fake: request %#x on closed fd %d", req, f.fd)
		return syscall.EBADF
	}
	if st.dialect == Auto || req == 0 {
		return syscall.EINVAL
	}
	if st.dialect == OCF && f.fd != fakeCloneFD && req != st.nr.CRIOGET && st.known(req) {
		st.t.Errorf("fake: OCF request %#x on the original descriptor, not the CRIOGET clone", req)
	}
	switch req {
	case st.nr.CRIOGET:
		if st.dialect != OCF {
			return syscall.EINVAL // the driver never needs cryptodev-linux's CRIOGET
		}
		*(*int32)(arg) = fakeCloneFD
		return nil
	case st.nr.CIOCASYMFEAT:
		*(*uint32)(arg) = 0
		return nil
	case st.nr.CIOCGSESSION:
		op := (*hostSessionOp)(arg)
		st.checkBytes("session_op", arg, unsafe.Sizeof(*op), func() ([]byte, error) {
			return EncodeSessionOp(st.arch, SessionFields{Cipher: op.cipher, MAC: op.mac, KeyLen: op.keylen,
				Key: addr(op.key), MACKeyLen: op.mackeylen, MACKey: addr(op.mackey), Ses: op.ses}, false)
		})
		ses, err := st.newSession(op.cipher, op.mac, op.key, op.keylen, op.mackey, op.mackeylen)
		op.ses = ses
		return err
	case st.nr.CIOCGSESSION2:
		if !st.session2 {
			return syscall.EINVAL
		}
		op := (*hostSession2Op)(arg)
		st.checkBytes("session2_op", arg, unsafe.Sizeof(*op), func() ([]byte, error) {
			return EncodeSessionOp(st.arch, SessionFields{Cipher: op.cipher, MAC: op.mac, KeyLen: op.keylen,
				Key: addr(op.key), MACKeyLen: op.mackeylen, MACKey: addr(op.mackey), Ses: op.ses, CRID: op.crid}, true)
		})
		alg := op.cipher | op.mac
		// CRYPTO_FLAG_HARDWARE 0x01000000, CRYPTO_FLAG_SOFTWARE 0x02000000
		if op.crid != 0x01000000 && op.crid != 0x03000000 {
			st.t.Errorf("fake: session2_op.crid = %#x, want a flags-only request", op.crid)
		}
		if op.crid == 0x01000000 && !st.hw[alg] {
			return syscall.EINVAL // no hardware driver for it
		}
		ses, err := st.newSession(op.cipher, op.mac, op.key, op.keylen, op.mackey, op.mackeylen)
		op.ses = ses
		op.crid = 1 // cryptosoft0
		if st.hw[alg] {
			op.crid = 2 // safe0
		}
		return err
	case st.nr.CIOCFINDDEV:
		if !st.session2 {
			return syscall.EINVAL
		}
		op := (*hostCryptFindOp)(arg)
		name := map[int32]string{1: "cryptosoft0", 2: "safe0"}[op.crid]
		if name == "" {
			return syscall.ENOENT
		}
		copy(op.name[:], name)
		return nil
	case st.nr.CIOCGSESSINFO:
		if st.noInfo {
			return syscall.EINVAL
		}
		op := (*hostSessionInfoOp)(arg)
		s := st.sessions[op.ses]
		if s == nil {
			return syscall.EINVAL
		}
		alg := s.alg | s.mac
		name := st.drivers[alg]
		if name == "" {
			name = fmt.Sprintf("generic-%d", alg)
		}
		if s.mac != 0 {
			copy(op.hashDriver[:], name)
		} else {
			copy(op.cipherDriver[:], name)
		}
		if st.hw[alg] {
			op.flags = 1 // SIOP_FLAG_KERNEL_DRIVER_ONLY
		}
		return nil
	case st.nr.CIOCFSESSION:
		ses := *(*uint32)(arg)
		if st.sessions[ses] == nil {
			return syscall.ENOENT
		}
		delete(st.sessions, ses)
		st.freed = append(st.freed, ses)
		return nil
	case st.nr.CIOCCRYPT:
		op := (*hostCryptOp)(arg)
		st.checkBytes("crypt_op", arg, unsafe.Sizeof(*op), func() ([]byte, error) {
			return EncodeCryptOp(st.arch, CryptFields{Ses: op.ses, Op: op.op, Flags: op.flags, Len: op.len,
				Src: addr(op.src), Dst: addr(op.dst), MAC: addr(op.mac), IV: addr(op.iv)})
		})
		st.crypts = append(st.crypts, *op)
		if len(st.cryptErrs) > 0 {
			err := st.cryptErrs[0]
			st.cryptErrs = st.cryptErrs[1:]
			if err != nil {
				return err
			}
		}
		return st.crypt(op)
	}
	return syscall.EINVAL
}

func (st *fakeState) known(req uint32) bool {
	n := st.nr
	return slices.Contains([]uint32{n.CRIOGET, n.CIOCGSESSION, n.CIOCFSESSION, n.CIOCCRYPT, n.CIOCASYMFEAT,
		n.CIOCGSESSINFO, n.CIOCGSESSION2, n.CIOCFINDDEV}, req)
}

// checkBytes compares the struct's memory with the pure encoding of the
// same values for the host Arch.
func (st *fakeState) checkBytes(name string, arg unsafe.Pointer, size uintptr, encode func() ([]byte, error)) {
	st.t.Helper()
	want, err := encode()
	if err != nil {
		st.t.Errorf("fake: encode %s: %v", name, err)
		return
	}
	got := unsafe.Slice((*byte)(arg), size)
	if !bytes.Equal(got, want) {
		st.t.Errorf("fake: %s bytes\n got %x\nwant %x", name, got, want)
	}
}

func (st *fakeState) newSession(alg, mac uint32, key *byte, keylen uint32, mackey *byte, mackeylen uint32) (uint32, error) {
	if (alg == 0) == (mac == 0) {
		st.t.Errorf("fake: session with cipher %d and mac %d: want exactly one", alg, mac)
		return 0, syscall.EINVAL
	}
	if (key == nil) != (keylen == 0) || (mackey == nil) != (mackeylen == 0) {
		st.t.Errorf("fake: key pointer/length mismatch (%v/%d, %v/%d)", key != nil, keylen, mackey != nil, mackeylen)
		return 0, syscall.EFAULT
	}
	if st.refuse[alg|mac] {
		return 0, syscall.EINVAL
	}
	s := &fakeSession{alg: alg, mac: mac}
	switch alg {
	case 0:
	case 1, 2, 11: // DES, 3DES, AES-CBC
		s.key = bytes.Clone(unsafe.Slice(key, keylen))
		if _, err := blockFor(alg, s.key); err != nil {
			return 0, syscall.EINVAL
		}
	case 16: // null: no key
		if keylen != 0 {
			st.t.Errorf("fake: null cipher got a %d-byte key", keylen)
		}
	default:
		return 0, syscall.EINVAL
	}
	if mac != 0 {
		natural := map[uint32]uint32{6: 16, 7: 20, 18: 32}[mac]
		switch {
		case natural == 0:
			return 0, syscall.EINVAL
		case st.dialect == OCF && mackeylen != natural: // OCF-linux insists
			return 0, syscall.EINVAL
		case mackeylen > 512: // CRYPTO_HMAC_MAX_KEY_LEN
			return 0, syscall.EINVAL
		}
		s.key = bytes.Clone(unsafe.Slice(mackey, mackeylen))
	}
	st.nextSes++
	st.sessions[st.nextSes] = s
	return st.nextSes, nil
}

// fakeAlgs names the fake's cipher and MAC numbers (the same in both
// dialects) by catalog cipher, for ocftest's standard-library reference;
// 11 is AES-CBC of any key size.
var fakeAlgs = map[uint32]string{1: "des-cbc", 2: "des-ede3-cbc", 11: "aes-128-cbc", 6: "hmac-md5", 7: "hmac-sha1", 18: "hmac-sha256"}

func blockFor(alg uint32, key []byte) (cipher.Block, error) {
	return ocftest.Block(fakeAlgs[alg], key)
}

// macFor is the HMAC for mac, one of the numbers newSession accepts.
func macFor(mac uint32, key []byte) hash.Hash {
	h, err := ocftest.MAC(fakeAlgs[mac], key)
	if err != nil {
		panic(err)
	}
	return h
}

func (st *fakeState) crypt(op *hostCryptOp) error {
	s := st.sessions[op.ses]
	if s == nil {
		return syscall.EINVAL
	}
	// The headers' values, not the driver's constants: COP_ENCRYPT 0 and
	// COP_DECRYPT 1 in cryptodev-linux, 1 and 2 in OCF.
	enc, dec := uint16(0), uint16(1)
	if st.dialect == OCF {
		enc, dec = 1, 2
		if op.len > 64*1024-1 { // CRYPTO_MAX_DATA_LEN
			return syscall.E2BIG
		}
	}
	if op.op != enc && op.op != dec {
		st.t.Errorf("fake: op %d is neither encrypt (%d) nor decrypt (%d) in %v", op.op, enc, dec, st.dialect)
		return syscall.EINVAL
	}
	if op.flags != 0 {
		st.t.Errorf("fake: flags %#x, want 0", op.flags)
	}
	if op.src == nil {
		st.t.Error("fake: NULL src")
		return syscall.EFAULT
	}
	src := unsafe.Slice(op.src, op.len)
	if s.mac != 0 {
		if op.mac == nil {
			st.t.Error("fake: MAC session without a mac pointer")
			return syscall.EFAULT
		}
		h := macFor(s.mac, s.key)
		h.Write(src)
		copy(unsafe.Slice(op.mac, h.Size()), h.Sum(nil))
		return nil
	}
	if op.mac != nil {
		st.t.Error("fake: mac pointer on a cipher session")
		return syscall.EINVAL
	}
	if op.dst == nil {
		st.t.Error("fake: NULL dst on a cipher session (the result would be dropped)")
		return syscall.EFAULT
	}
	dst := unsafe.Slice(op.dst, op.len)
	if s.alg == 16 {
		if st.dialect == OCF && op.iv == nil {
			st.t.Error("fake: OCF null cipher without an IV would skip a byte of data")
		}
		copy(dst, src)
		return nil
	}
	b, _ := blockFor(s.alg, s.key)
	if op.len%uint32(b.BlockSize()) != 0 {
		return syscall.EINVAL
	}
	if op.iv == nil {
		st.t.Error("fake: CBC request without an IV (OCF would take it from the data)")
		return syscall.EINVAL
	}
	iv := unsafe.Slice(op.iv, b.BlockSize())
	out := make([]byte, len(src))
	if op.op == enc {
		cipher.NewCBCEncrypter(b, iv).CryptBlocks(out, src)
	} else {
		cipher.NewCBCDecrypter(b, iv).CryptBlocks(out, src)
	}
	copy(dst, out)
	return nil
}
