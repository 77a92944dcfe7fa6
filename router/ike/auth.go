package ike

import (
	"crypto/subtle"
	"errors"
)

// keyPad is the PSK AUTH key pad (RFC 7296 2.15).
var keyPad = []byte("Key Pad for IKEv2")

// SignedOctets is what AUTH covers for one side (2.15): for the initiator
// its IKE_SA_INIT request, the responder's nonce and prf(SK_pi, IDi body);
// for the responder its IKE_SA_INIT response, the initiator's nonce and
// prf(SK_pr, IDr body). id is Identity.Body() of the signer's ID payload.
func SignedOctets(prf PRF, realMessage, peerNonce, skp, id []byte) []byte {
	out := make([]byte, 0, len(realMessage)+len(peerNonce)+prf.Size())
	out = append(append(out, realMessage...), peerNonce...)
	return append(out, prf.Apply(skp, id)...)
}

// PSKAuth is the AUTH data for method 2: prf(prf(PSK, "Key Pad for
// IKEv2"), signed octets).
func PSKAuth(prf PRF, psk, signed []byte) []byte {
	return prf.Apply(prf.Apply(psk, keyPad), signed)
}

// ErrAuth is a peer's AUTH that does not match: the shared secrets differ,
// or the identities.
var ErrAuth = errors.New("ike: AUTH does not match: the pre-shared keys or identities differ")

// VerifyPSK compares the peer's AUTH data with the expected one in
// constant time.
func VerifyPSK(prf PRF, psk, signed, got []byte) error {
	if subtle.ConstantTimeCompare(PSKAuth(prf, psk, signed), got) != 1 {
		return ErrAuth
	}
	return nil
}
