// Command envoy is skewer's stand-in for the Envoy proxy kind runs as the
// load balancer of an HA cluster. It reads the Envoy bootstrap file kind
// writes (envoy -c /home/envoy/envoy.yaml), follows the file-based LDS and
// CDS that kind rewrites, passes TCP to healthy control planes and checks
// their /healthz over TLS.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	configPath := flag.String("c", "/home/envoy/envoy.yaml", "bootstrap configuration file")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *configPath); err != nil {
		fmt.Fprintln(os.Stderr, "envoy (skewer stand-in):", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, configPath string) error {
	var boot bootstrap
	if err := readYAML(configPath, &boot); err != nil {
		return err
	}
	lds, cds := boot.DynamicResources.LDSConfig.path(), boot.DynamicResources.CDSConfig.path()
	if lds == "" || cds == "" {
		return fmt.Errorf("%s: dynamic_resources must name file-based lds_config and cds_config", configPath)
	}
	b := NewBalancer(ctx)
	if admin := boot.Admin.Address.String(); boot.Admin.Address.SocketAddress.PortValue != 0 {
		go serveAdmin(admin, b)
	}
	log.Printf("following %s and %s", lds, cds)
	return follow(ctx, b, lds, cds, 500*time.Millisecond)
}

// follow applies the configuration whenever either file changes; kind
// replaces them with an atomic rename, so a changed inode, size or mtime is
// the signal.
func follow(ctx context.Context, b *Balancer, lds, cds string, every time.Duration) error {
	var last string
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if id := fileIdentity(lds) + "|" + fileIdentity(cds); id != last {
			cfg, err := loadConfig(lds, cds)
			if err != nil {
				log.Printf("configuration not applied: %v", err)
			} else if err := b.Apply(cfg); err != nil {
				log.Printf("configuration applied with errors: %v", err)
			} else {
				log.Printf("configuration applied: %d listeners, %d clusters", len(cfg.Listeners), len(cfg.Clusters))
			}
			last = id
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func fileIdentity(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "missing"
	}
	var ino uint64
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		ino = s.Ino
	}
	return fmt.Sprintf("%d-%d-%d", ino, st.Size(), st.ModTime().UnixNano())
}

func serveAdmin(addr string, b *Balancer) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "LIVE") })
	mux.HandleFunc("/clusters", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, b.Status()) })
	if err := http.ListenAndServe(addr, mux); err != nil { //nolint:gosec
		log.Printf("admin: %v", err)
	}
}
