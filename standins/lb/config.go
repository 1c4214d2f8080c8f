package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"
)

// The subset of Envoy's v3 configuration that kind writes: a bootstrap file
// pointing at file-based LDS and CDS, TCP proxy listeners, and STRICT_DNS
// clusters with an HTTP(S) health check.

type bootstrap struct {
	DynamicResources struct {
		CDSConfig configSource `json:"cds_config"`
		LDSConfig configSource `json:"lds_config"`
	} `json:"dynamic_resources"`
	Admin struct {
		Address address `json:"address"`
	} `json:"admin"`
}

type configSource struct {
	PathConfigSource struct {
		Path string `json:"path"`
	} `json:"path_config_source"`
	Path string `json:"path"` // the older spelling
}

func (c configSource) path() string {
	if c.PathConfigSource.Path != "" {
		return c.PathConfigSource.Path
	}
	return c.Path
}

type address struct {
	SocketAddress struct {
		Address   string `json:"address"`
		PortValue int    `json:"port_value"`
	} `json:"socket_address"`
}

func (a address) String() string {
	return net.JoinHostPort(a.SocketAddress.Address, strconv.Itoa(a.SocketAddress.PortValue))
}

type listenerResources struct {
	Resources []struct {
		Name         string  `json:"name"`
		Address      address `json:"address"`
		FilterChains []struct {
			Filters []struct {
				TypedConfig struct {
					Cluster string `json:"cluster"`
				} `json:"typed_config"`
			} `json:"filters"`
		} `json:"filter_chains"`
	} `json:"resources"`
}

type clusterResources struct {
	Resources []struct {
		Name           string `json:"name"`
		ConnectTimeout string `json:"connect_timeout"`
		HealthChecks   []struct {
			Timeout            string `json:"timeout"`
			Interval           string `json:"interval"`
			UnhealthyThreshold int    `json:"unhealthy_threshold"`
			HealthyThreshold   int    `json:"healthy_threshold"`
			HTTPHealthCheck    *struct {
				Path string `json:"path"`
			} `json:"http_health_check"`
			TransportSocketMatchCriteria map[string]string `json:"transport_socket_match_criteria"`
		} `json:"health_checks"`
		LoadAssignment struct {
			Endpoints []struct {
				LBEndpoints []struct {
					Endpoint struct {
						Address address `json:"address"`
					} `json:"endpoint"`
				} `json:"lb_endpoints"`
			} `json:"endpoints"`
		} `json:"load_assignment"`
	} `json:"resources"`
}

// Listener accepts TCP and passes it to a cluster.
type Listener struct {
	Name    string
	Address string
	Cluster string
}

// HealthCheck is an active HTTP health check.
type HealthCheck struct {
	Path               string
	TLS                bool
	Interval, Timeout  time.Duration
	UnhealthyThreshold int
	HealthyThreshold   int
}

// Cluster is a set of backends behind a listener.
type Cluster struct {
	Name           string
	ConnectTimeout time.Duration
	Backends       []string // host:port, resolved at each connection
	Health         *HealthCheck
}

// Config is one generation of listeners and clusters.
type Config struct {
	Listeners []Listener
	Clusters  map[string]Cluster
}

func readYAML(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		return fmt.Errorf("failed to parse %s: %w", path, err)
	}
	return nil
}

func duration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	return time.ParseDuration(s)
}

// loadConfig reads LDS and CDS files.
func loadConfig(ldsPath, cdsPath string) (*Config, error) {
	var lds listenerResources
	var cds clusterResources
	if err := readYAML(ldsPath, &lds); err != nil {
		return nil, err
	}
	if err := readYAML(cdsPath, &cds); err != nil {
		return nil, err
	}
	cfg := &Config{Clusters: map[string]Cluster{}}
	for _, l := range lds.Resources {
		cluster := ""
		for _, fc := range l.FilterChains {
			for _, f := range fc.Filters {
				if f.TypedConfig.Cluster != "" {
					cluster = f.TypedConfig.Cluster
				}
			}
		}
		if cluster == "" {
			return nil, fmt.Errorf("listener %q names no cluster", l.Name)
		}
		cfg.Listeners = append(cfg.Listeners, Listener{Name: l.Name, Address: l.Address.String(), Cluster: cluster})
	}
	for _, c := range cds.Resources {
		ct, err := duration(c.ConnectTimeout, 5*time.Second)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: connect_timeout: %w", c.Name, err)
		}
		cl := Cluster{Name: c.Name, ConnectTimeout: ct}
		for _, e := range c.LoadAssignment.Endpoints {
			for _, lb := range e.LBEndpoints {
				cl.Backends = append(cl.Backends, lb.Endpoint.Address.String())
			}
		}
		if len(c.HealthChecks) > 0 && c.HealthChecks[0].HTTPHealthCheck != nil {
			h := c.HealthChecks[0]
			hc := &HealthCheck{Path: h.HTTPHealthCheck.Path, TLS: h.TransportSocketMatchCriteria["tls_mode"] == "true",
				UnhealthyThreshold: max(h.UnhealthyThreshold, 1), HealthyThreshold: max(h.HealthyThreshold, 1)}
			if hc.Interval, err = duration(h.Interval, 5*time.Second); err != nil {
				return nil, fmt.Errorf("cluster %q: interval: %w", c.Name, err)
			}
			if hc.Timeout, err = duration(h.Timeout, time.Second); err != nil {
				return nil, fmt.Errorf("cluster %q: timeout: %w", c.Name, err)
			}
			cl.Health = hc
		}
		cfg.Clusters[c.Name] = cl
	}
	return cfg, nil
}
