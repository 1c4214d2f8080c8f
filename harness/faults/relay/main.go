// Command relay forwards TCP connections to one address, holding every
// chunk of bytes for a fixed delay in each direction: a slow link without
// the kernel's netem, which this project's machines lack. harness/faults
// runs it inside a node's network namespace and sends the node's
// connections to a peer through it with an iptables REDIRECT.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:16443", "address to accept connections on")
	to := flag.String("to", "", "address every connection is forwarded to")
	delay := flag.Duration("delay", time.Second, "time each chunk is held, per direction")
	flag.Parse()
	if *to == "" {
		fmt.Fprintln(os.Stderr, "relay: -to is required")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("relay: %v", err)
	}
	log.Printf("relay: %s -> %s, %s each way", ln.Addr(), *to, *delay)
	log.Fatal(serve(ln, *to, *delay))
}

// serve accepts connections on ln until it fails, relaying each to to.
func serve(ln net.Listener, to string, delay time.Duration) error {
	for {
		in, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer in.Close()
			out, err := net.DialTimeout("tcp", to, 30*time.Second)
			if err != nil {
				log.Printf("relay: %v", err)
				return
			}
			defer out.Close()
			done := make(chan struct{}, 2)
			go func() { delayed(out, in, delay); done <- struct{}{} }()
			go func() { delayed(in, out, delay); done <- struct{}{} }()
			<-done
		}()
	}
}

type chunk struct {
	due  time.Time
	data []byte
}

// delayed copies src to dst, writing each chunk read no earlier than delay
// after it was read, in order. Reading goes on meanwhile, so the delay is
// latency, not a cap on throughput. It closes dst's write side at the end.
func delayed(dst, src net.Conn, delay time.Duration) {
	queue := make(chan chunk, 1024)
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				queue <- chunk{due: time.Now().Add(delay), data: buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		_ = dst.Close()
	}
	io.Copy(io.Discard, src) //nolint:errcheck // drain what is left after dst failed
}
