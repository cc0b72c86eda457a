// Command pause is the pod sandbox's init process for the end-to-end
// test's containerd (which pulls no image): it sleeps, reaps the zombies
// it inherits as PID 1 and exits on SIGINT or SIGTERM. Built static, it is
// the only file of its image. Test-only code.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
