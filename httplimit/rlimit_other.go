//go:build !unix

package httplimit

// openFilesLimit is unknown outside Unix.
func openFilesLimit() (uint64, bool) { return 0, false }
