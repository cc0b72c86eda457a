//go:build !linux

package command

// killMarked does nothing where processes cannot be found by their
// environment: the timeout kills the program's process group only.
func killMarked(string) {}
