// Package sshd is the router's management SSH server: public-key logins
// as one login name only, sessions that run the board's shell
// (interactively, with or without a pty, or one command with `exec`),
// the sftp subsystem over a virtual tree (sftp.go: a read-only view the
// caller gives and a bounded RAM staging area), and nothing else — no
// passwords, no port or agent forwarding, no other subsystem.
//
// The protocol (key exchange, ciphers, authentication, channels) is
// golang.org/x/crypto/ssh: a well-reviewed implementation that already
// links into the firmware for nothing else would be a poor thing to
// rewrite. The pty is creack/pty. What is written here is the policy the
// library leaves to its user: which keys get in (ParseAuthorizedKeys),
// how many connections may be logging in (per source and in all, as
// OpenSSH's MaxStartups), logged in, and their sessions, and for how long
// (Config, gate.go); which algorithms are offered (KeyExchanges and the
// rest: OpenSSH's defaults without SHA-1, CBC or NIST curves); which
// requests a session may make; how a command is started and stopped
// (processes run in their own process group, and a client that goes
// away hangs them up); and where the host keys live (LoadHostKeys with a
// caller's KeyStore).
//
// Everything runs inside the router's one long-running process: Serve
// and ListenAndServe return when their context is done, and every
// goroutine and buffer is bounded by MaxStartups + MaxConns × MaxSessions.
package sshd
