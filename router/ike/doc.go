// Package ike is ocfw's IKEv2 (RFC 7296). The lower half is stateless: the
// message codec, the crypto suite (Diffie-Hellman groups, prf+, key
// derivation, the Encrypted and Authenticated payload), pre-shared-key
// AUTH and proposal matching. The upper half is the Endpoint: per peer
// IKE SAs and their exchanges (IKE_SA_INIT, IKE_AUTH, CREATE_CHILD_SA,
// INFORMATIONAL), message windows of size 1 with retransmission, cookies,
// rekeys, liveness checks and NAT traversal. CHILD SAs go to a
// ChildSASink; the router's sink puts them into the kernel.
//
// Parsing is strict and bounded: every length is checked against the
// packet, a decoded message holds one copy of the packet at most, payload
// and substructure counts are capped, and errors are typed (*ParseError
// carries the Notify type a responder answers with). Key material never
// appears in an error, a log line or a String method.
package ike
