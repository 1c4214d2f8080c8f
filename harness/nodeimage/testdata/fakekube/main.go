// fakekube answers the version questions skewer asks a Kubernetes binary,
// the way the binary it is named after answers them, with the version it
// was built with (-X main.v=...): a vendor's release for tests, in seconds.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

var v = "unset"

func main() {
	switch filepath.Base(os.Args[0]) {
	case "kubeadm": // kubeadm version -o short
		fmt.Println(v)
	case "kubectl": // kubectl version --client -o json
		fmt.Printf("{\"clientVersion\": {\"gitVersion\": %q}}\n", v)
	default: // --version
		fmt.Println("Kubernetes " + v)
	}
}
