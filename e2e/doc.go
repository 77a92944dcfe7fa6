// Package e2e holds the end-to-end tests: each builds firmware images
// with the ocfw CLI in-process (cli.Run, as a user's command line would)
// and boots them in QEMU, alone or between the namespaces of a world VM:
// the whole chain from a board profile to the report on the card, the
// kernel's engine choice with the stand-in engines, the router, and two
// routers' IPsec tunnel.
//
// Every test skips with -short. They boot guests under TCG, one core
// each: the parallel tests take guest slots from a pool (guests_test.go)
// with as many as go test's -parallel (GOMAXPROCS, two here), which
// starts the longest first; a router beside an idle world VM counts as
// one guest, TestUpgradePowerCuts's two chains of cuts and the IPsec
// test's two routers as two. Every test that boots is one of them: a
// test run alone before the others leaves a slot idle. Builds of the same Go userland after the first are cheap:
// rootfs caches it; buildImage builds each set of inputs once per test
// binary and hands out copies (one SSH key per binary: equal site texts
// are equal files). A test that boots an image often and does not look
// at the ESP run builds it with --esp-budget 0s (8 s a boot).
package e2e
