package mps

import (
	"context"
	"math"
	"time"

	"github.com/go-kit/log/level"
)

// HeldFraction is the fraction a client runs with once f is set for it
// and it is restarted: f at the whole percentage sent, and no more than
// its server's value as last read (ClientState.Server). A value already in
// force at that is not one to set again: a policy that asks thousandths
// (0.125, held as 0.13) would restart the client at every round.
//
// A server's value read serverReread ago or more is read again before it
// holds f back (once for all the server's clients): an operator may have
// raised it since, and a client clamped to the old value would never be
// asked f again. Nothing is read for a fraction the server's value does
// not hold back. The read runs under the command timeout (Options.Timeout)
// and waits for the daemon's other commands.
func (c *Controller) HeldFraction(uuid string, pid uint32, f float64) float64 {
	return c.heldFraction(uuid, pid, f, true)
}

// CachedHeldFraction is HeldFraction with the server's value as last read,
// however old: it runs no daemon command and waits for none, for a caller
// that must not wait on the daemon outside its own deadline (the tuner's
// set-back comparison, under its lock, at exit too).
func (c *Controller) CachedHeldFraction(uuid string, pid uint32, f float64) float64 {
	return c.heldFraction(uuid, pid, f, false)
}

// heldFraction is HeldFraction, the server's value read again (once
// serverReread old) only where reread.
func (c *Controller) heldFraction(uuid string, pid uint32, f float64, reread bool) float64 {
	pct, err := percentage(f)
	if err != nil {
		return f
	}
	held := float64(pct) / 100
	c.mu.Lock()
	s := c.states[key{uuid, pid}]
	if s == nil || s.Role != RoleClient || s.Server == nil || held <= *s.Server {
		c.mu.Unlock()
		return held
	}
	server, limit, read := s.ServerPID, *s.Server, s.ServerRead
	c.mu.Unlock()
	if now := c.clock.Now(); reread && now.Sub(read) >= serverReread {
		limit = c.rereadServer(uuid, server, now, limit)
	}
	return math.Min(held, limit)
}

// serverReread is how old a server's value may be before HeldFraction
// reads it again to hold a client's fraction back.
const serverReread = time.Minute

// rereadServer reads the server's value again for its clients on uuid
// (ClientState.Server) and returns it; where the read fails, the value
// last read (limit) is kept, read again serverReread later.
func (c *Controller) rereadServer(uuid string, server uint32, now time.Time, limit float64) float64 {
	c.opMu.Lock()
	got, err := c.serverPercentage(context.Background(), server)
	c.opMu.Unlock()
	if err != nil {
		level.Warn(c.logger).Log("msg", "MPS server active threads not read again; its clients are held at the value last read", "uuid", uuid, "server_pid", server, "err", err)
	} else {
		limit = got / 100
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.states {
		if k.uuid == uuid && s.Role == RoleClient && s.ServerPID == server && s.Server != nil {
			l := limit
			s.Server, s.ServerRead = &l, now
		}
	}
	return limit
}
