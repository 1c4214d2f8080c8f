// Package skewer carries what the skewer binary needs of its own source
// when it runs outside a checkout (go install): the module's go.mod and
// go.sum, the cluster profiles and waivers, and the programs it builds
// into images (the stand-ins, the fixtures, the slow-link relay).
// internal/source writes them out once and builds from that copy.
package skewer

import "embed"

// Source is that part of the module, at the paths it has in a checkout.
//
//go:embed go.mod go.sum clusters standins fixtures harness/faults/relay
var Source embed.FS
