package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// A second interrupt ends vgpusim at once (by the signal, as the default
// handler does); the first lets the run stop and say so. Before, the
// second was swallowed and the process went on stopping.
func TestSecondInterruptEndsAtOnce(t *testing.T) {
	if os.Getenv("VGPUSIM_INTERRUPT_CHILD") == "1" {
		ctx := interruptible()
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		time.Sleep(30 * time.Second) // a stop that takes long
		os.Exit(3)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondInterruptEndsAtOnce$")
	cmd.Env = append(os.Environ(), "VGPUSIM_INTERRUPT_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("child: %q, %v", buf, err)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	time.Sleep(300 * time.Millisecond) // the first one taken
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("after a second interrupt the process ended with %v, want killed by SIGINT", err)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Error("a second interrupt did not end the process")
	}
}

// SIGTERM (kill, timeout, a CI job cancelled, a container stopped) stops
// a run as an interrupt does: it says so and removes the --out
// directories it made. Before, it killed the process by the signal,
// without a word, leaving those directories.
func TestTermStopsLikeAnInterrupt(t *testing.T) {
	if os.Getenv("VGPUSIM_TERM_CHILD") == "1" {
		ctx := interruptible()
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		os.Exit(3) // stopped, as a run does at its step
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTermStopsLikeAnInterrupt$")
	cmd.Env = append(os.Environ(), "VGPUSIM_TERM_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("child: %q, %v", buf, err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() || ws.ExitStatus() != 3 {
			t.Errorf("after SIGTERM the process ended with %v, want it to stop by itself (status 3)", err)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Error("SIGTERM did not end the process")
	}
}
