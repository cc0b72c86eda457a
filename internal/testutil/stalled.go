package testutil

import (
	"net"
	"net/http"
	"os"
	"sync"
)

// StalledClient is an HTTP client that reads nothing of its response: its
// first write reports on writing, then waits for unblock to close and
// fails, as a write cut at its deadline does.
type StalledClient struct {
	writing chan<- struct{}
	unblock <-chan struct{}
	header  http.Header
	once    sync.Once
}

// NewStalledClient returns a StalledClient reporting on writing, held
// until unblock closes.
func NewStalledClient(writing chan<- struct{}, unblock <-chan struct{}) *StalledClient {
	return &StalledClient{writing: writing, unblock: unblock, header: http.Header{}}
}

func (c *StalledClient) Header() http.Header { return c.header }
func (c *StalledClient) WriteHeader(int)     {}

func (c *StalledClient) Write([]byte) (int, error) {
	c.once.Do(func() { c.writing <- struct{}{} })
	<-c.unblock
	return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}
}
