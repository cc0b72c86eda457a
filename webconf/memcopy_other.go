//go:build !linux

package webconf

import "errors"

// memCopy exists only on Linux; elsewhere exporter-toolkit reads the file.
type memCopy struct{}

// haveMemCopy says whether newMemCopy can make a copy on this system.
const haveMemCopy = false

// memfdRefused is nil: there is no memfd to refuse (haveMemCopy).
func memfdRefused() error { return nil }

func newMemCopy(string, []byte) (*memCopy, error) { return nil, errNoMemCopy }

func (c *memCopy) path() string { return "" }

func (c *memCopy) replace(*memCopy) error { return errNoMemCopy }

func (c *memCopy) close() error { return nil }

// errNoMemCopy is newMemCopy's error where there is no memfd.
var errNoMemCopy = errors.New("no memfd on this system")
