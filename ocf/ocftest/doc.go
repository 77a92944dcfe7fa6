// Package ocftest has helpers for tests only: the standard library's
// answers (Reference, Block, MAC) that driver tests compare engines with.
// No package that ships in the firmware imports it; the misbehaving test
// engines that do ship are in package ocf/fault.
package ocftest
