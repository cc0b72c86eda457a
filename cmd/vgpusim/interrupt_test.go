package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// a run as an interrupt does: "vgpusim: error: interrupted", exit status
// 1, and the --out directories it made (DIR/a/b, both missing before)
// removed. Before, it killed the process by the signal, without a word,
// leaving those directories. The child is vgpusim's main with the
// arguments of a run long enough not to end first.
func TestTermStopsLikeAnInterrupt(t *testing.T) {
	if dir := os.Getenv("VGPUSIM_TERM_OUT"); dir != "" {
		os.Args = []string{"vgpusim", "run", "--scenario", "bursty-llm-training", "--duration", "168h", "--out", dir}
		main()
		return
	}
	parent := t.TempDir()
	out := filepath.Join(parent, "a", "b")
	cmd := exec.Command(os.Args[0], "-test.run=^TestTermStopsLikeAnInterrupt$")
	cmd.Env = append(os.Environ(), "VGPUSIM_TERM_OUT="+out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// the run has begun once it has made --out
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(out); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before making %s: %s", err, out, stderr.String())
		default:
		}
		if time.Since(start) > 20*time.Second {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the run made no %s in 20s: %s", out, stderr.String())
		}
	}
	time.Sleep(200 * time.Millisecond) // into the simulation
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("SIGTERM did not end the run in 20s")
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() || ws.ExitStatus() != 1 {
		t.Errorf("after SIGTERM the run ended with %v, want exit status 1", cmd.ProcessState)
	}
	if !strings.HasPrefix(stderr.String(), "vgpusim: error: interrupted") {
		t.Errorf("after SIGTERM stderr is %q, want \"vgpusim: error: interrupted...\"", stderr.String())
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("after SIGTERM %s holds %v, want the directories --out made removed", parent, left)
	}
}
