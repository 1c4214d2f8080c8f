package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestDelayedRoundTrip relays to a real echo server: every byte comes back
// in order, and a round trip takes at least the delay twice.
func TestDelayedRoundTrip(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const delay = 150 * time.Millisecond
	go serve(ln, echo.Addr().String(), delay)

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for i := 0; i < 3; i++ {
		msg := bytes.Repeat([]byte{byte('a' + i)}, 100_000) // several chunks
		start := time.Now()
		go c.Write(append(msg, '\n'))
		got, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		rtt := time.Since(start)
		if !bytes.Equal(got[:len(got)-1], msg) {
			t.Fatalf("round %d: %d bytes back, not the %d sent in order", i, len(got)-1, len(msg))
		}
		if rtt < 2*delay {
			t.Errorf("round %d: round trip %s, want at least %s", i, rtt, 2*delay)
		}
		if rtt > 2*delay+2*time.Second {
			t.Errorf("round %d: round trip %s: the delay is not latency alone", i, rtt)
		}
	}
}

// TestDialFailureClosesClient: with nothing at the far end, the client's
// connection is closed rather than left hanging.
func TestDialFailureClosesClient(t *testing.T) {
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := dead.Addr().String()
	dead.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go serve(ln, addr, 10*time.Millisecond)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read = %v, want EOF", err)
	}
}
