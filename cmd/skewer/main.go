// Command skewer proves, on real kind clusters, that a control-plane rolling
// upgrade across a version skew and a migration to native sidecars are safe.
package main

import (
	"os"

	"github.com/skewer-k8s/skewer/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
