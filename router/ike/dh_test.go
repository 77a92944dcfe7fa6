package ike

import (
	"bytes"
	"crypto/rand"
	"errors"
	"math/big"
	"testing"
)

func TestMODP2048IsRFC3526Group(t *testing.T) {
	// The constant is a safe prime of 2048 bits with 2 generating the
	// prime-order subgroup (2 is a quadratic residue when p = 7 mod 8).
	q := new(big.Int).Rsh(modp2048, 1)
	if modp2048.BitLen() != 2048 || !modp2048.ProbablyPrime(20) || !q.ProbablyPrime(20) {
		t.Fatal("the MODP-2048 modulus is not a 2048-bit safe prime")
	}
	if new(big.Int).Exp(big.NewInt(2), q, modp2048).Cmp(big.NewInt(1)) != 0 {
		t.Fatal("2 does not generate the order-q subgroup")
	}
}

func TestDHAgreement(t *testing.T) {
	for _, g := range []DHGroup{MODP2048, ECP256, Curve25519} {
		a, err := GenerateDH(g, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		b, err := GenerateDH(g, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Public()) != g.PublicLen() {
			t.Errorf("%s: public value of %d bytes, want %d", g, len(a.Public()), g.PublicLen())
		}
		sa, err := a.Shared(b.Public())
		if err != nil {
			t.Fatal(g, err)
		}
		sb, err := b.Shared(a.Public())
		if err != nil {
			t.Fatal(g, err)
		}
		if !bytes.Equal(sa, sb) {
			t.Errorf("%s: the two sides disagree", g)
		}
	}
	if _, err := GenerateDH(2, rand.Reader); !errors.Is(err, ErrUnsupported) {
		t.Errorf("group 2: %v, want ErrUnsupported", err)
	}
}

func TestMODPRejectsBadPublic(t *testing.T) {
	k, err := GenerateDH(MODP2048, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pad := func(x *big.Int) []byte { return x.FillBytes(make([]byte, 256)) }
	one := big.NewInt(1)
	pm1 := new(big.Int).Sub(modp2048, one)
	pm2 := new(big.Int).Sub(modp2048, big.NewInt(2))
	// -2 is a non-residue (-1 is one as p = 3 mod 4, 2 is a residue), so
	// it lies outside the order-q subgroup: only the y^q check catches it.
	if big.Jacobi(pm2, modp2048) != -1 {
		t.Fatal("p-2 is a quadratic residue: pick another non-member")
	}
	for name, y := range map[string][]byte{
		"0": pad(new(big.Int)), "1": pad(one), "p-1": pad(pm1), "p": pad(modp2048),
		"all ones": bytes.Repeat([]byte{0xff}, 256), "outside the subgroup": pad(pm2),
		"short": make([]byte, 255),
	} {
		if _, err := k.Shared(y); !errors.Is(err, ErrBadPublic) {
			t.Errorf("public value %s: %v, want ErrBadPublic", name, err)
		}
	}
}

// RFC 5903 8.1: the ECP-256 test vector (i, g^i, r, g^r, g^ir).
func TestECP256RFC5903Vector(t *testing.T) {
	i := unhex(t, "C88F01F5 10D9AC3F 70A292DA A2316DE5 44E9AAB8 AFE84049 C62A9C57 862D1433")
	gi := unhex(t, `DAD0B653 94221CF9 B051E1FE CA5787D0 98DFE637 FC90B9EF 945D0C37 72581180
		5271A046 1CDB8252 D61F1C45 6FA3E59A B1F45B33 ACCF5F58 389E0577 B8990BB3`)
	r := unhex(t, "C6EF9C5D 78AE012A 011164AC B397CE20 88685D8F 06BF9BE0 B283AB46 476BEE53")
	gr := unhex(t, `D12DFB52 89C8D4F8 1208B702 70398C34 2296970A 0BCCB74C 736FC755 4494BF63
		56FBF3CA 366CC23E 8157854C 13C58D6A AC23F046 ADA30F83 53E74F33 039872AB`)
	gir := unhex(t, "D6840F6B 42F6EDAF D13116E0 E1256520 2FEF8E9E CE7DCE03 812464D0 4B9442DE")
	checkVector(t, ECP256, i, gi, r, gr, gir)
	// Not on the curve: change one coordinate byte.
	k, _ := dhFromPrivate(ECP256, i)
	bad := append([]byte(nil), gr...)
	bad[63] ^= 1
	if _, err := k.Shared(bad); !errors.Is(err, ErrBadPublic) {
		t.Errorf("point off the curve: %v, want ErrBadPublic", err)
	}
}

// RFC 7748 6.1: X25519 Alice and Bob, used by RFC 8031 as is.
func TestCurve25519RFC7748Vector(t *testing.T) {
	a := unhex(t, "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
	ga := unhex(t, "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
	b := unhex(t, "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
	gb := unhex(t, "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
	gab := unhex(t, "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
	checkVector(t, Curve25519, a, ga, b, gb, gab)
	// RFC 8031 2.3: a low-order point gives the all-zero secret: refused.
	k, _ := dhFromPrivate(Curve25519, a)
	for _, low := range [][]byte{make([]byte, 32), append([]byte{1}, make([]byte, 31)...)} {
		if _, err := k.Shared(low); !errors.Is(err, ErrBadPublic) {
			t.Errorf("low-order point %x: %v, want ErrBadPublic", low, err)
		}
	}
}

func checkVector(t *testing.T, g DHGroup, i, gi, r, gr, gir []byte) {
	t.Helper()
	ki, err := dhFromPrivate(g, i)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := dhFromPrivate(g, r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ki.Public(), gi) || !bytes.Equal(kr.Public(), gr) {
		t.Errorf("%s public values\n got %x\nwant %x", g, ki.Public(), gi)
	}
	for _, c := range []struct {
		k    *DHKey
		peer []byte
	}{{ki, gr}, {kr, gi}} {
		s, err := c.k.Shared(c.peer)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(s, gir) {
			t.Errorf("%s shared secret %x, want %x", g, s, gir)
		}
	}
}
