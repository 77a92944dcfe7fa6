// Package ike holds the foundation of ocfw's IKEv2 (RFC 7296): the message
// codec, the crypto suite (Diffie-Hellman groups, prf+, key derivation, the
// Encrypted and Authenticated payload), pre-shared-key AUTH and proposal
// matching. The exchanges and the kernel SA install are built on top of it
// elsewhere; this package keeps no state between messages.
//
// Parsing is strict and bounded: every length is checked against the
// packet, a decoded message holds one copy of the packet at most, payload
// and substructure counts are capped, and errors are typed (*ParseError
// carries the Notify type a responder answers with). Key material never
// appears in an error or a String method.
package ike
