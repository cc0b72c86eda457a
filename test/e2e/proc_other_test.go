//go:build e2e && !linux

package e2e

import "os/exec"

// dieWithParent does nothing where the kernel cannot tie a child's life to
// its parent; the test's cleanup still kills the process.
func dieWithParent(*exec.Cmd) {}
