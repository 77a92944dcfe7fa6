package ike

import "fmt"

// ExchangeType is the IKE header's Exchange Type (RFC 7296 3.1).
type ExchangeType uint8

const (
	IKE_SA_INIT     ExchangeType = 34
	IKE_AUTH        ExchangeType = 35
	CREATE_CHILD_SA ExchangeType = 36
	INFORMATIONAL   ExchangeType = 37
)

func (e ExchangeType) String() string {
	switch e {
	case IKE_SA_INIT:
		return "IKE_SA_INIT"
	case IKE_AUTH:
		return "IKE_AUTH"
	case CREATE_CHILD_SA:
		return "CREATE_CHILD_SA"
	case INFORMATIONAL:
		return "INFORMATIONAL"
	}
	return fmt.Sprintf("exchange(%d)", uint8(e))
}

// PayloadType is a Next Payload value (RFC 7296 3.2).
type PayloadType uint8

const (
	PayloadNone    PayloadType = 0
	PayloadSA      PayloadType = 33
	PayloadKE      PayloadType = 34
	PayloadIDi     PayloadType = 35
	PayloadIDr     PayloadType = 36
	PayloadCERT    PayloadType = 37
	PayloadCERTREQ PayloadType = 38
	PayloadAUTH    PayloadType = 39
	PayloadNonce   PayloadType = 40
	PayloadNotify  PayloadType = 41
	PayloadDelete  PayloadType = 42
	PayloadVendor  PayloadType = 43
	PayloadTSi     PayloadType = 44
	PayloadTSr     PayloadType = 45
	PayloadSK      PayloadType = 46
	PayloadCP      PayloadType = 47
	PayloadEAP     PayloadType = 48
)

var payloadNames = map[PayloadType]string{
	PayloadSA: "SA", PayloadKE: "KE", PayloadIDi: "IDi", PayloadIDr: "IDr",
	PayloadCERT: "CERT", PayloadCERTREQ: "CERTREQ", PayloadAUTH: "AUTH",
	PayloadNonce: "Nonce", PayloadNotify: "Notify", PayloadDelete: "Delete",
	PayloadVendor: "Vendor ID", PayloadTSi: "TSi", PayloadTSr: "TSr",
	PayloadSK: "SK", PayloadCP: "CP", PayloadEAP: "EAP",
}

func (p PayloadType) String() string {
	if n, ok := payloadNames[p]; ok {
		return n
	}
	return fmt.Sprintf("payload(%d)", uint8(p))
}

// known reports whether RFC 7296 defines the type: the critical bit of such
// a payload is ignored even where this package keeps it only as Raw.
func (p PayloadType) known() bool { _, ok := payloadNames[p]; return ok }

// Flags are the IKE header's flags (RFC 7296 3.1).
type Flags uint8

const (
	FlagInitiator Flags = 0x08
	FlagVersion   Flags = 0x10
	FlagResponse  Flags = 0x20
)

// ProtocolID names the protocol of a proposal, notify or delete (3.3.1).
type ProtocolID uint8

const (
	ProtoIKE ProtocolID = 1
	ProtoAH  ProtocolID = 2
	ProtoESP ProtocolID = 3
)

// NotifyType is a Notify Message Type (RFC 7296 3.10.1); below 16384 an
// error, from 16384 a status.
type NotifyType uint16

const (
	UNSUPPORTED_CRITICAL_PAYLOAD  NotifyType = 1
	INVALID_IKE_SPI               NotifyType = 4
	INVALID_MAJOR_VERSION         NotifyType = 5
	INVALID_SYNTAX                NotifyType = 7
	INVALID_MESSAGE_ID            NotifyType = 9
	INVALID_SPI                   NotifyType = 11
	NO_PROPOSAL_CHOSEN            NotifyType = 14
	INVALID_KE_PAYLOAD            NotifyType = 17
	AUTHENTICATION_FAILED         NotifyType = 24
	SINGLE_PAIR_REQUIRED          NotifyType = 34
	NO_ADDITIONAL_SAS             NotifyType = 35
	INTERNAL_ADDRESS_FAILURE      NotifyType = 36
	FAILED_CP_REQUIRED            NotifyType = 37
	TS_UNACCEPTABLE               NotifyType = 38
	INVALID_SELECTORS             NotifyType = 39
	TEMPORARY_FAILURE             NotifyType = 43
	CHILD_SA_NOT_FOUND            NotifyType = 44
	INITIAL_CONTACT               NotifyType = 16384
	SET_WINDOW_SIZE               NotifyType = 16385
	ADDITIONAL_TS_POSSIBLE        NotifyType = 16386
	IPCOMP_SUPPORTED              NotifyType = 16387
	NAT_DETECTION_SOURCE_IP       NotifyType = 16388
	NAT_DETECTION_DESTINATION_IP  NotifyType = 16389
	COOKIE                        NotifyType = 16390
	USE_TRANSPORT_MODE            NotifyType = 16391
	HTTP_CERT_LOOKUP_SUPPORTED    NotifyType = 16392
	REKEY_SA                      NotifyType = 16393
	ESP_TFC_PADDING_NOT_SUPPORTED NotifyType = 16394
	NON_FIRST_FRAGMENTS_ALSO      NotifyType = 16395
	MOBIKE_SUPPORTED              NotifyType = 16396 // RFC 4555
	IKEV2_FRAGMENTATION_SUPPORTED NotifyType = 16430 // RFC 7383
	SIGNATURE_HASH_ALGORITHMS     NotifyType = 16431 // RFC 7427
	CHILDLESS_IKEV2_SUPPORTED     NotifyType = 16418 // RFC 6023
)

var notifyNames = map[NotifyType]string{
	UNSUPPORTED_CRITICAL_PAYLOAD: "UNSUPPORTED_CRITICAL_PAYLOAD", INVALID_IKE_SPI: "INVALID_IKE_SPI",
	INVALID_MAJOR_VERSION: "INVALID_MAJOR_VERSION", INVALID_SYNTAX: "INVALID_SYNTAX",
	INVALID_MESSAGE_ID: "INVALID_MESSAGE_ID", INVALID_SPI: "INVALID_SPI",
	NO_PROPOSAL_CHOSEN: "NO_PROPOSAL_CHOSEN", INVALID_KE_PAYLOAD: "INVALID_KE_PAYLOAD",
	AUTHENTICATION_FAILED: "AUTHENTICATION_FAILED", SINGLE_PAIR_REQUIRED: "SINGLE_PAIR_REQUIRED",
	NO_ADDITIONAL_SAS: "NO_ADDITIONAL_SAS", INTERNAL_ADDRESS_FAILURE: "INTERNAL_ADDRESS_FAILURE",
	FAILED_CP_REQUIRED: "FAILED_CP_REQUIRED", TS_UNACCEPTABLE: "TS_UNACCEPTABLE",
	INVALID_SELECTORS: "INVALID_SELECTORS", TEMPORARY_FAILURE: "TEMPORARY_FAILURE",
	CHILD_SA_NOT_FOUND: "CHILD_SA_NOT_FOUND", INITIAL_CONTACT: "INITIAL_CONTACT",
	SET_WINDOW_SIZE: "SET_WINDOW_SIZE", ADDITIONAL_TS_POSSIBLE: "ADDITIONAL_TS_POSSIBLE",
	IPCOMP_SUPPORTED: "IPCOMP_SUPPORTED", NAT_DETECTION_SOURCE_IP: "NAT_DETECTION_SOURCE_IP",
	NAT_DETECTION_DESTINATION_IP: "NAT_DETECTION_DESTINATION_IP", COOKIE: "COOKIE",
	USE_TRANSPORT_MODE: "USE_TRANSPORT_MODE", HTTP_CERT_LOOKUP_SUPPORTED: "HTTP_CERT_LOOKUP_SUPPORTED",
	REKEY_SA: "REKEY_SA", ESP_TFC_PADDING_NOT_SUPPORTED: "ESP_TFC_PADDING_NOT_SUPPORTED",
	NON_FIRST_FRAGMENTS_ALSO: "NON_FIRST_FRAGMENTS_ALSO", MOBIKE_SUPPORTED: "MOBIKE_SUPPORTED",
	IKEV2_FRAGMENTATION_SUPPORTED: "IKEV2_FRAGMENTATION_SUPPORTED", SIGNATURE_HASH_ALGORITHMS: "SIGNATURE_HASH_ALGORITHMS",
	CHILDLESS_IKEV2_SUPPORTED: "CHILDLESS_IKEV2_SUPPORTED",
}

func (n NotifyType) String() string {
	if s, ok := notifyNames[n]; ok {
		return s
	}
	return fmt.Sprintf("notify(%d)", uint16(n))
}

// IsError reports whether the type is an error notification (below 16384).
func (n NotifyType) IsError() bool { return n < 16384 }

// IDType is an Identification payload's ID Type (3.5).
type IDType uint8

const (
	ID_IPV4_ADDR   IDType = 1
	ID_FQDN        IDType = 2
	ID_RFC822_ADDR IDType = 3
	ID_IPV6_ADDR   IDType = 5
	ID_DER_ASN1_DN IDType = 9
	ID_KEY_ID      IDType = 11
)

// AuthMethod is an AUTH payload's Auth Method (3.8).
type AuthMethod uint8

const (
	AuthRSASig       AuthMethod = 1
	AuthSharedKeyMIC AuthMethod = 2
	AuthDSSSig       AuthMethod = 3
)

// TSType is a traffic selector's TS Type (3.13.1).
type TSType uint8

const (
	TS_IPV4_ADDR_RANGE TSType = 7
	TS_IPV6_ADDR_RANGE TSType = 8
)
